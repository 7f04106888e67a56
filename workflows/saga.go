package workflows

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// PaymentSignal tells the saga a payment was recorded for its order.
type PaymentSignal struct {
	TransactionID string
}

// CancelSignal is a user's request to cancel the unpaid order.
type CancelSignal struct {
	Reason string
}

// expiryMargin lets the expiry timer fire a little after expires_at, so the
// database clock (which decides) has passed it too.
const expiryMargin = time.Second

// paymentStartWait is how long a cancel waits for a payment being started at
// the provider before it asks again.
const paymentStartWait = 2 * time.Second

// SagaInput starts a ReservationSaga: the ORDER_CREATE_REQUESTED it serves.
type SagaInput struct {
	Message events.OrderCreateRequested
	// Resume starts a new run for a reservation whose saga is gone (it was
	// terminated, failed, or a deploy lost it): the saga reads where the
	// reservation stands in PostgreSQL and carries on from there instead of
	// creating the order. Message then holds only what PostgreSQL keeps
	// (ResumeMessage); it is never used to create an order.
	Resume bool `json:",omitempty"`
	// LocalForward runs the forward steps as local activities (saga.forward)
	// and leaves the search attributes to the start. StartSaga and ResumeSaga
	// set it; runs started without it keep the activity path they recorded.
	LocalForward bool `json:",omitempty"`
}

// SagaState is what the query handler returns and what the saga ends with.
type SagaState struct {
	ReservationID string
	// Status is where the saga stands, in state's words (state.Saga: the
	// ReservationStatus search attribute holds the same text).
	Status    state.Saga
	OrderID   string    `json:",omitempty"`
	ExpiresAt time.Time `json:",omitzero"`
	Reason    string    `json:",omitempty"`
	// Steps is the saga's history in words, newest last.
	Steps []string
	// Repairs lists the repair signals received and what became of them.
	Repairs []steps.RepairResult `json:",omitempty"`
}

// ReservationSaga is the durable life of one reservation after the gateway:
// create the order (or its durable rejection), then project it, or give the
// unit back to Redis; anything automation cannot decide waits, visible as
// ReservationStatus = "MANUAL_REVIEW", for a repair signal.
func ReservationSaga(ctx workflow.Context, in SagaInput) (SagaState, error) {
	s := &saga{in: in, state: SagaState{ReservationID: in.Message.ReservationID.String(), Status: state.SagaReserved},
		carriedOut: map[string]bool{}}
	// Runs started before the local forward path replay as they ran
	// (activity tasks, an explicit first upsert): their input has no
	// LocalForward. Deciding by the input costs no marker and no upsert.
	s.local = in.LocalForward
	if err := s.setup(ctx); err != nil {
		return s.state, err
	}
	var err error
	if in.Resume {
		_, err = s.resume(ctx)
	} else {
		_, err = s.run(ctx)
	}
	s.drain(ctx)
	return s.state, err
}

type saga struct {
	in       SagaInput
	state    SagaState
	repairs  workflow.ReceiveChannel
	payments workflow.ReceiveChannel
	cancels  workflow.ReceiveChannel
	// local: the forward steps (CreateOrder, the projection) run as local
	// activities, and the start's search attributes are not upserted again.
	local bool
	// carriedOut holds the repair_ids whose action this run carried out: a
	// second signal with the same id is ignored, while a decision returned
	// as a duplicate (ApplyRepair retried after its commit) is carried out.
	carriedOut map[string]bool
}

var act *activities.Activities

func (s *saga) setup(ctx workflow.Context) error {
	s.repairs = workflow.GetSignalChannel(ctx, SignalRepair)
	s.payments = workflow.GetSignalChannel(ctx, SignalPayment)
	s.cancels = workflow.GetSignalChannel(ctx, SignalCancel)
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (SagaState, error) { return s.state, nil }); err != nil {
		return err
	}
	workflow.SetCurrentDetails(ctx, "**"+s.state.Status.String()+"**: creating the order")
	if s.local {
		return nil // SagaStartOptions set them at the start
	}
	return workflow.UpsertTypedSearchAttributes(ctx,
		SearchActivityID.ValueSet(s.in.Message.ActivityID),
		SearchSKUID.ValueSet(s.in.Message.SKUID),
		SearchReservationStatus.ValueSet(state.SagaReserved.String()))
}

// dbActivity options: PostgreSQL/Redis work, retried with backoff for as long
// as it takes (an unknown outcome is not a failure); business outcomes are
// results, not errors. Each takes milliseconds; the 10 s start-to-close
// timeout is how soon an attempt lost with its worker (a crash) is retried,
// and the 20 s cap how soon after an outage ends the saga moves again.
func dbActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         dbRetry(),
	})
}

func dbRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 20 * time.Second}
}

// localFor bounds a forward step run as a local activity, retries included:
// past it (an outage) the step falls back to an activity retried for as long
// as it takes.
const localFor = 30 * time.Second

// forward runs one step of the saga's forward path. On the local path it is a
// local activity first: it runs in this worker inside the workflow task and
// leaves one marker in the history instead of an activity task's three events
// and a second workflow task. A worker lost during it loses the workflow
// task, and the next worker runs the step again (every step is idempotent by
// its fixed ids). If it cannot finish within localFor, the step runs as an
// ordinary activity (dbActivity), as it always does on the old path.
func (s *saga) forward(ctx workflow.Context, fn, arg, out any) error {
	if s.local {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: localFor, StartToCloseTimeout: 10 * time.Second, RetryPolicy: dbRetry()})
		err := workflow.ExecuteLocalActivity(lctx, fn, arg).Get(ctx, out)
		if err == nil || temporal.IsCanceledError(err) {
			return err
		}
		workflow.GetLogger(ctx).Warn("saga.local_step_failed", "error", err)
	}
	return workflow.ExecuteActivity(dbActivity(ctx), fn, arg).Get(ctx, out)
}

func (s *saga) setStatus(ctx workflow.Context, status state.Saga, step string) {
	s.state.Status = status
	s.state.Steps = append(s.state.Steps, step)
	// The UI's "current details": where the saga stands, without its history.
	workflow.SetCurrentDetails(ctx, "**"+status.String()+"**: "+step)
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchReservationStatus.ValueSet(status.String())); err != nil {
		workflow.GetLogger(ctx).Error("upsert search attribute", "error", err)
	}
}

func (s *saga) run(ctx workflow.Context) (SagaState, error) {
	m := s.in.Message
	var res steps.CreateOrderResult
	if err := s.forward(ctx, act.CreateOrder, m, &res); err != nil {
		if detail, ok := permanent(err); ok {
			return s.unprocessable(ctx, err, detail)
		}
		return s.state, err
	}
	s.state.Reason = res.Reason
	switch res.Outcome {
	case steps.OutcomeCreated:
		s.state.OrderID, s.state.ExpiresAt = res.OrderID.String(), res.ExpiresAt
		s.setStatus(ctx, state.SagaOrderCreated, "order created")
		if err := s.project(ctx, ""); err != nil {
			return s.state, err
		}
		return s.awaitPayment(ctx)
	case steps.OutcomeRejected:
		s.setStatus(ctx, state.SagaRejected, "order rejected: "+res.Reason)
		return s.compensate(ctx)
	case steps.OutcomeLate:
		s.setStatus(ctx, state.SagaLate, "late message after a durable decision: "+res.Reason)
		return s.state, nil
	case steps.OutcomeManual:
		s.setStatus(ctx, state.SagaManual, "manual review: "+res.Reason)
		return s.awaitRepair(ctx)
	}
	return s.state, errors.New("unknown CreateOrder outcome " + string(res.Outcome))
}

// resume carries on a reservation whose earlier saga is gone, from where
// PostgreSQL says it stands: an open order waits for its payment or expiry
// (and is cancelled by the same protocol), a cancelled one gets its Redis
// release, a rejection its compensation, a reservation under review waits
// for repair. A reservation PostgreSQL does not hold is left to
// reconciliation, which rejects it durably after its deadline.
func (s *saga) resume(ctx workflow.Context) (SagaState, error) {
	var st steps.ReservationState
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.LoadReservation, s.in.Message.ReservationID).Get(ctx, &st); err != nil {
		return s.state, err
	}
	s.state.Reason = st.Reason
	if st.OrderID != uuid.Nil {
		s.state.OrderID, s.state.ExpiresAt = st.OrderID.String(), st.ExpiresAt
	}
	s.state.Steps = append(s.state.Steps, "resumed from PostgreSQL: reservation "+nonEmpty(st.Status.String(), "absent")+", order "+nonEmpty(st.OrderStatus.String(), "none"))
	switch st.Status {
	case state.ReservationOrderCreated:
		switch st.OrderStatus {
		case state.OrderPaid, state.OrderRefunding, state.OrderRefunded:
			s.setStatus(ctx, state.OrderSaga(st.OrderStatus), "order is "+st.OrderStatus.String())
			return s.state, nil
		}
		s.setStatus(ctx, state.SagaOrderCreated, "order created")
		if err := s.project(ctx, ""); err != nil {
			return s.state, err
		}
		return s.awaitPayment(ctx)
	case state.ReservationCancelled:
		return s.state, s.release(ctx)
	case state.ReservationOrderRejected, state.ReservationCompensating:
		s.setStatus(ctx, state.SagaRejected, "order rejected: "+st.Reason)
		return s.compensate(ctx)
	case state.ReservationCompensated:
		s.setStatus(ctx, state.SagaCompensated, "stock given back to redis")
		return s.state, nil
	case state.ReservationManualReview:
		s.setStatus(ctx, state.SagaManual, "manual review: "+st.Reason)
		return s.awaitRepair(ctx)
	}
	s.state.Steps = append(s.state.Steps, "nothing in PostgreSQL to resume: reconciliation settles the reservation after its deadline")
	return s.state, nil
}

func nonEmpty(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (s *saga) compensate(ctx workflow.Context) (SagaState, error) {
	m := s.in.Message
	var c steps.CompensateResult
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.Compensate, steps.CompensateInput{
		ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID, Bucket: m.Bucket,
	}).Get(ctx, &c); err != nil {
		if _, ok := permanent(err); ok && workflow.GetVersion(ctx, versionPermanentBranches, workflow.DefaultVersion, 1) == 1 {
			return s.compensationRefused(ctx, err)
		}
		return s.state, err
	}
	if c.Status == state.ReservationCompensated {
		s.setStatus(ctx, state.SagaCompensated, "stock given back to redis: "+c.Reason)
		return s.state, nil
	}
	s.state.Reason = c.Reason
	s.setStatus(ctx, state.SagaManual, "compensation needs a person: "+c.Reason)
	return s.awaitRepair(ctx)
}

// awaitRepair waits for repair signals; each is validated and recorded by
// the ApplyRepair activity against PostgreSQL, then the saga resumes through
// the standard transitions.
func (s *saga) awaitRepair(ctx workflow.Context) (SagaState, error) {
	for {
		var req steps.RepairRequest
		s.repairs.Receive(ctx, &req)
		action, err := s.repair(ctx, req)
		if err != nil {
			return s.state, err
		}
		switch action {
		case steps.RepairRetryCompensation:
			s.setStatus(ctx, state.SagaRejected, "repair "+req.RepairID+": retry compensation")
			return s.compensate(ctx)
		case steps.RepairMarkResolved:
			s.setStatus(ctx, state.SagaResolved, "repair "+req.RepairID+": marked resolved by "+req.Operator)
			return s.state, nil
		}
	}
}

// repair validates and records one repair signal (ApplyRepair) and returns
// the action the saga must carry out now, or "" for none: refused, a second
// signal with a repair_id this run already carried out, or a repair that
// failed for good (recorded in the saga's steps; the saga keeps waiting).
// A repair_id recorded before is carried out when its recorded decision is
// an acceptance: that is ApplyRepair answering its own retry after a commit
// whose reply was lost, not a new decision.
func (s *saga) repair(ctx workflow.Context, req steps.RepairRequest) (string, error) {
	req.ReservationID = s.in.Message.ReservationID
	var r steps.RepairResult
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.ApplyRepair, req).Get(ctx, &r); err != nil {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.NonRetryable() {
			s.state.Steps = append(s.state.Steps, "repair "+req.RepairID+" failed for good: "+appErr.Error())
			return "", nil
		}
		return "", err
	}
	s.state.Repairs = append(s.state.Repairs, r)
	switch {
	case !r.Accepted:
		s.state.Steps = append(s.state.Steps, "repair "+req.Action+" refused: "+r.Reason)
		return "", nil
	case s.carriedOut[req.RepairID]:
		s.state.Steps = append(s.state.Steps, "repair "+req.RepairID+" already carried out: ignored")
		return "", nil
	}
	s.carriedOut[req.RepairID] = true
	if r.Action != "" {
		return r.Action, nil // the recorded decision's action (a duplicate carries out what was decided)
	}
	return req.Action, nil
}
