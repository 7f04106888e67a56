package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
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
// even the rejection cannot be recorded, the saga waits in MANUAL_REVIEW
// with the reason, for a repair signal.
func (s *saga) unprocessable(ctx workflow.Context, cause error, detail string) (SagaState, error) {
	if workflow.GetVersion(ctx, versionPermanentBranches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return s.state, cause
	}
	s.state.Steps = append(s.state.Steps, "order transaction failed for good ("+detail+"): "+cause.Error())
	var st string
	err := workflow.ExecuteActivity(dbActivity(ctx), act.RejectUnprocessable, activities.UnprocessableInput{
		Message: s.in.Message, Detail: detail}).Get(ctx, &st)
	if err != nil {
		if _, ok := permanent(err); !ok {
			return s.state, err
		}
		s.state.Reason = activities.ReasonUnprocessable
		s.setStatus(ctx, StatusManual, "manual review: the order transaction and its rejection failed for good: "+err.Error())
		return s.awaitRepair(ctx)
	}
	return s.resume(ctx)
}
