package workflows

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

func testMessage() events.OrderCreateRequested {
	rid := uuid.MustParse("8f1d0c2a-1b2c-8d3e-8f40-5a6b7c8d9e0f")
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	return events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested,
		MessageID: uuid.MustParse("1a2b3c4d-5e6f-8a7b-9c8d-0e1f2a3b4c5d"), MessageKey: rid.String(),
		RequestID: uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b"), ReservationID: rid,
		ActivityID: 1001, SKUID: 90001, UserID: 80000001, KeyVersion: 1, ReservedAt: at, BusinessDeadline: at.Add(5 * time.Minute)}
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	return env
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) SagaState {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("saga did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("saga failed: %v", err)
	}
	var st SagaState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSagaPaidBeforeExpiry(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	oid := orders.ID(m.ReservationID)
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeCreated, OrderID: oid,
		ExpiresAt: env.Now().Add(15 * time.Minute)}, nil).Once()
	env.OnActivity(act.ProjectOrderCreated, mock.Anything, steps.ProjectionInput{ReservationID: m.ReservationID,
		OrderID: oid, ActivityID: m.ActivityID, SKUID: m.SKUID}).Return(steps.ProjectionResult{Code: 1}, nil).Once()
	env.OnActivity(act.OrderStatus, mock.Anything, oid).Return(state.OrderPaid, nil).Once()
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPayment, PaymentSignal{TransactionID: "txn_1"}) }, time.Minute)
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	st := result(t, env)
	if st.Status != state.SagaPaid || st.OrderID != oid.String() {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

// A saga started with LocalForward (every new start) runs its forward steps
// (CreateOrder, the projection) as local activities inside its workflow task;
// what follows (the payment's status check) stays an activity. One started
// without it (before the change) keeps the activity path its history holds.
func TestSagaForwardStepsAreLocalActivities(t *testing.T) {
	for _, c := range []struct {
		localForward  bool
		local, remote []string
	}{
		{true, []string{"CreateOrder", "ProjectOrderCreated"}, []string{"OrderStatus"}},
		{false, nil, []string{"CreateOrder", "ProjectOrderCreated", "OrderStatus"}},
	} {
		env := newEnv(t)
		m := testMessage()
		oid := orders.ID(m.ReservationID)
		env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeCreated, OrderID: oid,
			ExpiresAt: env.Now().Add(15 * time.Minute)}, nil).Once()
		env.OnActivity(act.ProjectOrderCreated, mock.Anything, mock.Anything).Return(steps.ProjectionResult{Code: 1}, nil).Once()
		env.OnActivity(act.OrderStatus, mock.Anything, oid).Return(state.OrderPaid, nil).Once()
		var local, remote []string
		env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
			local = append(local, info.ActivityType.Name)
		})
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			remote = append(remote, info.ActivityType.Name)
		})
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalPayment, PaymentSignal{TransactionID: "txn_1"}) }, time.Minute)
		env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m, LocalForward: c.localForward})
		if st := result(t, env); st.Status != state.SagaPaid {
			t.Fatalf("LocalForward %v: state = %+v", c.localForward, st)
		}
		if !slices.Equal(local, c.local) || !slices.Equal(remote, c.remote) {
			t.Errorf("LocalForward %v: local activities %q, activities %q", c.localForward, local, remote)
		}
	}
}

func TestSagaRetriesInfrastructureErrors(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{}, errors.New("connection reset")).Times(3)
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeLate, Reason: "LATE_AFTER_COMPENSATED"}, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	if st := result(t, env); st.Status != state.SagaLate {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

func TestSagaRejectedCompensates(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonStockExhausted}, nil)
	env.OnActivity(act.Compensate, mock.Anything, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}).
		Return(steps.CompensateResult{Status: state.ReservationCompensated, LuaCode: 1, Reason: "COMPENSATED"}, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	st := result(t, env)
	if st.Status != state.SagaCompensated || st.Reason != steps.ReasonStockExhausted {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

// A missing Redis reservation never adds stock: the saga shows MANUAL_REVIEW
// and waits; a refused repair keeps it waiting; retry-compensation resumes it.
func TestSagaCompensationMissingKeyWaitsForRepair(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	in := steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonDeadline}, nil)
	env.OnActivity(act.Compensate, mock.Anything, in).Return(steps.CompensateResult{Status: state.ReservationManualReview, LuaCode: -1, Reason: "RESERVATION_MISSING"}, nil).Once()
	bad := steps.RepairRequest{Action: "delete-everything", RepairID: "r-0", Operator: "ops", Reason: "x", ReservationID: m.ReservationID}
	good := steps.RepairRequest{Action: steps.RepairRetryCompensation, RepairID: "r-1", Operator: "ops", Reason: "key restored", ReservationID: m.ReservationID}
	env.OnActivity(act.ApplyRepair, mock.Anything, bad).Return(steps.RepairResult{RepairID: "r-0", Reason: "unknown action"}, nil).Once()
	env.OnActivity(act.ApplyRepair, mock.Anything, good).Return(steps.RepairResult{RepairID: "r-1", Accepted: true}, nil).Once()
	env.OnActivity(act.Compensate, mock.Anything, in).Return(steps.CompensateResult{Status: state.ReservationCompensated, LuaCode: 1}, nil).Once()

	var seen []state.Saga
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryState)
		if err != nil {
			t.Error(err)
			return
		}
		var st SagaState
		_ = v.Get(&st)
		seen = append(seen, st.Status)
		env.SignalWorkflow(SignalRepair, steps.RepairRequest{Action: bad.Action, RepairID: bad.RepairID, Operator: bad.Operator, Reason: bad.Reason})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryState)
		var st SagaState
		_ = v.Get(&st)
		seen = append(seen, st.Status)
		env.SignalWorkflow(SignalRepair, steps.RepairRequest{Action: good.Action, RepairID: good.RepairID, Operator: good.Operator, Reason: good.Reason})
	}, 2*time.Minute)
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	st := result(t, env)
	if len(seen) != 2 || seen[0] != state.SagaManual || seen[1] != state.SagaManual {
		t.Fatalf("statuses while waiting = %v, want MANUAL_REVIEW twice", seen)
	}
	if st.Status != state.SagaCompensated || len(st.Repairs) != 2 || st.Repairs[0].Accepted || !st.Repairs[1].Accepted {
		t.Fatalf("final state = %+v", st)
	}
	env.AssertExpectations(t)
}

func TestSagaPayloadConflictWaitsAndCanBeResolved(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeManual, Reason: steps.ReasonPayloadConflict}, nil)
	req := steps.RepairRequest{Action: steps.RepairMarkResolved, RepairID: "r-9", Operator: "ops", Reason: "duplicate publisher bug, INC-1", ReservationID: m.ReservationID}
	env.OnActivity(act.ApplyRepair, mock.Anything, req).Return(steps.RepairResult{RepairID: "r-9", Accepted: true}, nil).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalRepair, steps.RepairRequest{Action: req.Action, RepairID: req.RepairID, Operator: req.Operator, Reason: req.Reason})
	}, time.Hour)
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	if st := result(t, env); st.Status != state.SagaResolved {
		t.Fatalf("state = %+v", st)
	}
}

// TestSagaPublishesItsCurrentStep: the UI's current details say where the
// saga stands (its status and last step) without opening its history.
func TestSagaPublishesItsCurrentStep(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeRejected,
		Reason: steps.ReasonStockExhausted}, nil).Once()
	env.OnActivity(act.Compensate, mock.Anything, mock.Anything).Return(steps.CompensateResult{Status: state.ReservationCompensated}, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	st := result(t, env)
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	want := "**" + state.SagaCompensated.String() + "**: " + st.Steps[len(st.Steps)-1]
	if got := md.GetCurrentDetails(); got != want {
		t.Fatalf("current details = %q, want %q", got, want)
	}
}
