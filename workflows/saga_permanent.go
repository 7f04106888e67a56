package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/state/steps"
)

// versionPermanentBranches guards the branches a saga takes on a step that
// failed for good (a non-retryable error): runs recorded before them failed
// the workflow there, and replay keeps that.
const versionPermanentBranches = "permanent-error-branches"

// permanent reports whether err is a step's non-retryable failure (a
// permanent database error, a refused input, a business refusal) and says
// which: its type, and the SQLSTATE when it carries one.
func permanent(err error) (detail string, ok bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() {
		return "", false
	}
	detail = appErr.Type()
	var code string
	if appErr.HasDetails() && appErr.Details(&code) == nil && code != "" {
		detail += ":" + code
	}
	return detail, true
}

// unprocessable handles a CreateOrder that failed for good: no retry makes
// the order transaction pass, so the reservation is rejected durably
// (RejectUnprocessable: ORDER_REJECTED, reason ORDER_UNPROCESSABLE:<detail>)
// and then carried on from where PostgreSQL says it stands, which for a
// rejection is the standard compensation: the unit goes back to Redis. If
// even the rejection cannot be recorded (PostgreSQL refuses the reservation
// row itself), PostgreSQL holds nothing a repair could act on: the saga
// fails with that error (SeckillActivityPermanentFailure), and
// reconciliation's overdue check settles the Redis reservation after its
// deadline by the same rules (docs/operations.md#an-activity-keeps-failing).
func (s *saga) unprocessable(ctx workflow.Context, cause error, detail string) (SagaState, error) {
	if workflow.GetVersion(ctx, versionPermanentBranches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return s.state, cause
	}
	s.state.Steps = append(s.state.Steps, "order transaction failed for good ("+detail+"): "+cause.Error())
	var st string
	err := workflow.ExecuteActivity(dbActivity(ctx), act.RejectUnprocessable, steps.UnprocessableInput{
		Message: s.in.Message, Detail: detail}).Get(ctx, &st)
	if err != nil {
		s.state.Reason = steps.ReasonUnprocessable
		return s.state, err
	}
	return s.resume(ctx)
}

// compensationRefused handles a compensation refused for good: PostgreSQL
// holds no rejection to compensate (something else moved the reservation).
// The saga reads where it stands and carries on from there (resume), as a
// saga started afresh would: a reservation under review waits for a repair
// signal that can be applied, one compensated or absent ends the saga.
func (s *saga) compensationRefused(ctx workflow.Context, err error) (SagaState, error) {
	s.state.Steps = append(s.state.Steps, "compensation refused for good: "+err.Error())
	return s.resume(ctx)
}
