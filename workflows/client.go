package workflows

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/state/steps"
)

// Temporal is the part of the Temporal client that starts and signals
// workflows (client.Client has it; tests pass a fake).
type Temporal interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
	ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
}

// Sagas asks running sagas for things on behalf of the API (internal/checkout):
// cancel an order, hear of a payment, start a refund. Each call names its
// workflow by the fixed ID and start options of this package.
type Sagas struct {
	tc        Temporal
	taskQueue string
}

// NewSagas returns Sagas over tc on taskQueue.
func NewSagas(tc Temporal, taskQueue string) (*Sagas, error) {
	if tc == nil || taskQueue == "" {
		return nil, errors.New("workflows: nil Temporal client or empty task queue")
	}
	return &Sagas{tc: tc, taskQueue: taskQueue}, nil
}

// Cancel signals the reservation's saga to cancel its order. A saga that is
// gone (terminated, failed) is resumed from m with the cancel as its first
// signal (signal-with-start, ResumeStartOptions).
func (s *Sagas) Cancel(ctx context.Context, m events.OrderCreateRequested, reason string) error {
	if _, err := s.tc.SignalWithStartWorkflow(ctx, ReservationWorkflowID(m.ReservationID.String()), SignalCancel,
		CancelSignal{Reason: reason}, ResumeStartOptions(s.taskQueue, m), ReservationSaga,
		SagaInput{Message: m, Resume: true}); err != nil {
		return fmt.Errorf("signal saga: %w", err)
	}
	return nil
}

// Paid tells the reservation's saga that its order was paid (a hint: the
// saga reads PostgreSQL).
func (s *Sagas) Paid(ctx context.Context, reservationID uuid.UUID, transactionID string) error {
	return s.tc.SignalWorkflow(ctx, ReservationWorkflowID(reservationID.String()), "", SignalPayment,
		PaymentSignal{TransactionID: transactionID})
}

// StartRefund starts the payment's refund workflow (idempotent by its ID).
func (s *Sagas) StartRefund(ctx context.Context, paymentID uuid.UUID, activityID, skuID int64) error {
	return StartRefund(ctx, s.tc, s.taskQueue, RefundInput{PaymentID: paymentID, ActivityID: activityID, SKUID: skuID})
}

// Starter is the part of the Temporal client that starts workflows.
type Starter interface {
	ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
}

// StartRefund starts in's RefundWorkflow; one already running (or done) is
// success.
func StartRefund(ctx context.Context, tc Starter, taskQueue string, in RefundInput) error {
	return startOnce(ctx, tc, RefundStartOptions(taskQueue, in), RefundWorkflow, in, "start refund of "+in.PaymentID.String())
}

// StartSaga starts the saga of the reservation m serves (SagaStartOptions);
// one already there is success.
func StartSaga(ctx context.Context, tc Starter, taskQueue string, m events.OrderCreateRequested) error {
	return startOnce(ctx, tc, SagaStartOptions(taskQueue, m), ReservationSaga, SagaInput{Message: m, LocalForward: true},
		"start saga of "+m.ReservationID.String())
}

// ResumeSaga starts a new run of a saga that is gone, carrying on from
// PostgreSQL (ResumeStartOptions, SagaInput.Resume); a running one is left as it is.
func ResumeSaga(ctx context.Context, tc Starter, taskQueue string, m events.OrderCreateRequested) error {
	return startOnce(ctx, tc, ResumeStartOptions(taskQueue, m), ReservationSaga, SagaInput{Message: m, Resume: true, LocalForward: true},
		"resume saga of "+m.ReservationID.String())
}

// startOnce starts a workflow whose ID makes the start idempotent: "already
// started" is success.
func startOnce(ctx context.Context, tc Starter, o client.StartWorkflowOptions, wf, arg any, what string) error {
	_, err := tc.ExecuteWorkflow(ctx, o, wf, arg)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// SignalWithStarter is the part of the Temporal client that signals a
// workflow, starting it first when it does not run.
type SignalWithStarter interface {
	SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any,
		options client.StartWorkflowOptions, workflow any, workflowArgs ...any) (client.WorkflowRun, error)
}

// RepairSaga sends req to the reservation's saga as its repair signal. A
// saga that is not running (terminated, failed, completed, or never
// started) is started again with SagaInput.Resume and the repair as its
// first signal: it reads the reservation from PostgreSQL and, for one in
// MANUAL_REVIEW, waits for a repair, which it then takes (signal-with-start,
// ResumeStartOptions). m comes from PostgreSQL (inventory.Message).
func RepairSaga(ctx context.Context, tc SignalWithStarter, taskQueue string, m events.OrderCreateRequested, req steps.RepairRequest) error {
	if _, err := tc.SignalWithStartWorkflow(ctx, ReservationWorkflowID(m.ReservationID.String()), SignalRepair, req,
		ResumeStartOptions(taskQueue, m), ReservationSaga, SagaInput{Message: m, Resume: true, LocalForward: true}); err != nil {
		return fmt.Errorf("repair saga of %s: %w", m.ReservationID, err)
	}
	return nil
}
