package workflows

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

const paymentWindow = 15 * time.Minute

// createdEnv: a saga whose order was created with a 15-minute payment window.
func createdEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, SagaInput, uuid.UUID) {
	env := newEnv(t)
	m := testMessage()
	oid := orders.ID(m.ReservationID)
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeCreated,
		OrderID: oid, ExpiresAt: env.Now().Add(paymentWindow)}, nil).Once()
	env.OnActivity(act.ProjectOrderCreated, mock.Anything, mock.Anything).Return(steps.ProjectionResult{Code: 1}, nil).Once()
	return env, SagaInput{Message: m}, oid
}

func releaseInput(in SagaInput, oid uuid.UUID) steps.ReleaseInput {
	return steps.ReleaseInput{ReservationID: in.Message.ReservationID, OrderID: oid, ActivityID: in.Message.ActivityID, SKUID: in.Message.SKUID}
}

func TestSagaExpiryCancelsAndReleases(t *testing.T) {
	env, in, oid := createdEnv(t)
	var cancelAt time.Time
	env.OnActivity(act.BeginCancel, mock.Anything, activities.CancelInput{OrderID: oid, RequireExpired: true}).
		Run(func(mock.Arguments) { cancelAt = env.Now() }).Return(state.CancelFound(state.OrderCancelPending), nil).Once()
	env.OnActivity(act.CloseAtProvider, mock.Anything, oid).Return(steps.CloseResult{Outcome: steps.CloseClosed}, nil).Once()
	env.OnActivity(act.FinalCancel, mock.Anything, oid).Return(state.OrderCancelled, nil).Once()
	env.OnActivity(act.ReleaseRedis, mock.Anything, releaseInput(in, oid)).Return(steps.ProjectionResult{Code: 1, Text: "RELEASED"}, nil).Once()
	start := env.Now()
	env.ExecuteWorkflow(ReservationSaga, in)
	if st := result(t, env); st.Status != state.SagaCancelled {
		t.Fatalf("state = %+v", st)
	}
	if cancelAt.Sub(start) < paymentWindow {
		t.Fatalf("cancel began %v after creation, before the payment window ended", cancelAt.Sub(start))
	}
	env.AssertExpectations(t)
}

func TestSagaPaymentDuringCancelPendingWins(t *testing.T) {
	env, in, oid := createdEnv(t)
	env.OnActivity(act.BeginCancel, mock.Anything, mock.Anything).Return(state.CancelFound(state.OrderCancelPending), nil).Once()
	env.OnActivity(act.CloseAtProvider, mock.Anything, oid).Return(steps.CloseResult{Outcome: steps.CloseNoPayment}, nil).Once()
	// The callback recorded the payment between close and the final CAS.
	env.OnActivity(act.FinalCancel, mock.Anything, oid).Return(state.OrderPaid, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, in)
	if st := result(t, env); st.Status != state.SagaPaid {
		t.Fatalf("state = %+v", st)
	}
	env.AssertNotCalled(t, "ReleaseRedis", mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

func TestSagaProviderSaysPaidDuringClose(t *testing.T) {
	env, in, oid := createdEnv(t)
	ev := steps.Evidence{OrderID: oid, Provider: "paysim", TransactionID: "txn_9", AmountCents: 4999}
	env.OnActivity(act.BeginCancel, mock.Anything, mock.Anything).Return(state.CancelFound(state.OrderCancelPending), nil).Once()
	env.OnActivity(act.CloseAtProvider, mock.Anything, oid).Return(steps.CloseResult{Outcome: steps.ClosePaid, Evidence: ev}, nil).Once()
	env.OnActivity(act.RecordPayment, mock.Anything, ev).Return(steps.RecordResult{Outcome: steps.RecordPaid, OrderStatus: state.OrderPaid}, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, in)
	if st := result(t, env); st.Status != state.SagaPaid {
		t.Fatalf("state = %+v", st)
	}
	env.AssertNotCalled(t, "FinalCancel", mock.Anything, mock.Anything)
	env.AssertExpectations(t)
}

func TestSagaUserCancelAndDuplicateSignals(t *testing.T) {
	env, in, oid := createdEnv(t)
	env.OnActivity(act.BeginCancel, mock.Anything, activities.CancelInput{OrderID: oid, RequireExpired: false}).Return(state.CancelFound(state.OrderCancelPending), nil).Once()
	env.OnActivity(act.CloseAtProvider, mock.Anything, oid).Return(steps.CloseResult{Outcome: steps.CloseClosed}, nil).Once()
	env.OnActivity(act.FinalCancel, mock.Anything, oid).Return(state.OrderCancelled, nil).Once()
	env.OnActivity(act.ReleaseRedis, mock.Anything, releaseInput(in, oid)).Return(steps.ProjectionResult{Code: 1}, nil).Once()
	// A payment hint that PostgreSQL does not confirm is ignored, twice.
	env.OnActivity(act.OrderStatus, mock.Anything, oid).Return(state.OrderPaying, nil).Twice()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalPayment, PaymentSignal{TransactionID: "txn_1"})
		env.SignalWorkflow(SignalPayment, PaymentSignal{TransactionID: "txn_1"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalCancel, CancelSignal{Reason: "changed my mind"})
		env.SignalWorkflow(SignalCancel, CancelSignal{Reason: "changed my mind"})
	}, 2*time.Minute)
	env.ExecuteWorkflow(ReservationSaga, in)
	if st := result(t, env); st.Status != state.SagaCancelled {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

func TestSagaEarlyTimerWaitsAgain(t *testing.T) {
	env, in, _ := createdEnv(t)
	env.OnActivity(act.BeginCancel, mock.Anything, mock.Anything).Return(state.CancelFound(state.OrderCreated), nil).Once()
	env.OnActivity(act.BeginCancel, mock.Anything, mock.Anything).Return(state.CancelFound(state.OrderPaid), nil).Once()
	env.ExecuteWorkflow(ReservationSaga, in)
	if st := result(t, env); st.Status != state.SagaPaid {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

func TestRefundWorkflow(t *testing.T) {
	env := newEnv(t)
	env.RegisterWorkflow(RefundWorkflow)
	pid := uuid.New()
	r := steps.Refund{PaymentID: pid, OrderID: uuid.New(), Provider: "paysim", TransactionID: "txn_2", AmountCents: 4999}
	env.OnActivity(act.BeginRefund, mock.Anything, pid).Return(r, nil).Once()
	env.OnActivity(act.RefundAtProvider, mock.Anything, r).Return(nil).Once()
	env.OnActivity(act.FinishRefund, mock.Anything, r).Return(nil).Once()
	env.ExecuteWorkflow(RefundWorkflow, RefundInput{PaymentID: pid, ActivityID: 1, SKUID: 2})
	var out state.Saga
	if err := env.GetWorkflowResult(&out); err != nil || out != state.SagaRefunded {
		t.Fatalf("refund = %q, %v", out, err)
	}
	env.AssertExpectations(t)
}

func TestSagaRepairForceCancelAndRebuildProjection(t *testing.T) {
	env, in, oid := createdEnv(t)
	rebuild := steps.RepairRequest{Action: steps.RepairRebuildProjection, RepairID: "r-1", Operator: "ops", Reason: "projection lost", ReservationID: in.Message.ReservationID}
	cancel := steps.RepairRequest{Action: steps.RepairForceCancelUnpaid, RepairID: "r-2", Operator: "ops", Reason: "buyer asked by phone", ReservationID: in.Message.ReservationID}
	env.OnActivity(act.ApplyRepair, mock.Anything, rebuild).Return(steps.RepairResult{RepairID: "r-1", Accepted: true}, nil).Once()
	env.OnActivity(act.ApplyRepair, mock.Anything, cancel).Return(steps.RepairResult{RepairID: "r-2", Accepted: true}, nil).Once()
	// The projection runs once at creation and once more for the repair.
	env.OnActivity(act.ProjectOrderCreated, mock.Anything, mock.Anything).Return(steps.ProjectionResult{Code: 2, Text: "ORDER_CREATED"}, nil).Once()
	env.OnActivity(act.BeginCancel, mock.Anything, activities.CancelInput{OrderID: oid, RequireExpired: false}).Return(state.CancelFound(state.OrderCancelPending), nil).Once()
	env.OnActivity(act.CloseAtProvider, mock.Anything, oid).Return(steps.CloseResult{Outcome: steps.CloseNoPayment}, nil).Once()
	env.OnActivity(act.FinalCancel, mock.Anything, oid).Return(state.OrderCancelled, nil).Once()
	env.OnActivity(act.ReleaseRedis, mock.Anything, releaseInput(in, oid)).Return(steps.ProjectionResult{Code: 1}, nil).Once()
	signal := func(r steps.RepairRequest) {
		env.SignalWorkflow(SignalRepair, steps.RepairRequest{Action: r.Action, RepairID: r.RepairID, Operator: r.Operator, Reason: r.Reason})
	}
	env.RegisterDelayedCallback(func() { signal(rebuild) }, time.Minute)
	env.RegisterDelayedCallback(func() { signal(cancel) }, 2*time.Minute)
	env.ExecuteWorkflow(ReservationSaga, in)
	st := result(t, env)
	if st.Status != state.SagaCancelled || len(st.Repairs) != 2 {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}
