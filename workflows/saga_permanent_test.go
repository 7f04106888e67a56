package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// A CreateOrder that fails for good (here a unique violation past its bound)
// is not the end of the reservation: the saga rejects it durably and gives
// its unit back through the standard compensation.
func TestSagaOrderTransactionFailedForGoodIsRejectedAndCompensated(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	perm := temporal.NewNonRetryableApplicationError("duplicate key value (SQLSTATE 23505)", "PermanentDatabaseError", nil, "23505")
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{}, perm)
	env.OnActivity(act.RejectUnprocessable, mock.Anything, steps.UnprocessableInput{Message: m, Detail: "PermanentDatabaseError:23505"}).
		Return(state.ReservationOrderRejected, nil).Once()
	env.OnActivity(act.LoadReservation, mock.Anything, m.ReservationID).
		Return(steps.ReservationState{Status: state.ReservationOrderRejected, Reason: steps.ReasonUnprocessable + ":PermanentDatabaseError:23505"}, nil).Once()
	env.OnActivity(act.Compensate, mock.Anything, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}).
		Return(steps.CompensateResult{Status: state.ReservationCompensated, LuaCode: 1, Reason: "COMPENSATED"}, nil).Once()
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m, LocalForward: true})
	st := result(t, env)
	if st.Status != state.SagaCompensated {
		t.Fatalf("state = %+v, want COMPENSATED", st)
	}
	env.AssertExpectations(t)
}

// If even the rejection cannot be recorded, PostgreSQL holds nothing a repair
// could act on: the saga fails with the error (no MANUAL_REVIEW that no
// repair could end), and reconciliation settles the Redis reservation.
func TestSagaUnrecordableReservationFails(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	perm := temporal.NewNonRetryableApplicationError("value too long (SQLSTATE 22001)", "PermanentDatabaseError", nil, "22001")
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{}, perm)
	env.OnActivity(act.RejectUnprocessable, mock.Anything, mock.Anything).Return(state.Reservation{}, perm).Once()
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
		t.Fatal("saga did not fail when its reservation could not be recorded")
	}
	env.AssertExpectations(t)
}

// A compensation refused for good (PostgreSQL holds no rejection) does not
// retry forever nor wait for a repair no one could apply: the saga reads where
// the reservation stands and carries on from there (here: under review, so
// it waits for a repair signal, which ApplyRepair can accept).
func TestSagaCompensationRefusedCarriesOnFromPostgreSQL(t *testing.T) {
	env := newEnv(t)
	m := testMessage()
	env.OnActivity(act.CreateOrder, mock.Anything, m).Return(steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonStockExhausted}, nil)
	refusal := temporal.NewNonRetryableApplicationError("reservation x is MANUAL_REVIEW: not compensable", activities.ErrTypeRefused, nil)
	env.OnActivity(act.Compensate, mock.Anything, mock.Anything).Return(steps.CompensateResult{}, refusal).Once()
	env.OnActivity(act.LoadReservation, mock.Anything, m.ReservationID).Return(steps.ReservationState{Status: state.ReservationManualReview, Reason: "COUNTER_MISSING"}, nil).Once()
	req := steps.RepairRequest{Action: steps.RepairMarkResolved, RepairID: "r-2", Operator: "ops", Reason: "checked, INC-3", ReservationID: m.ReservationID}
	env.OnActivity(act.ApplyRepair, mock.Anything, req).Return(steps.RepairResult{RepairID: "r-2", Accepted: true}, nil).Once()
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalRepair, steps.RepairRequest{Action: req.Action, RepairID: req.RepairID, Operator: req.Operator, Reason: req.Reason})
	}, time.Hour)
	env.ExecuteWorkflow(ReservationSaga, SagaInput{Message: m})
	if st := result(t, env); st.Status != state.SagaResolved {
		t.Fatalf("state = %+v", st)
	}
	env.AssertExpectations(t)
}

// A refund refused for good is held for a person (HoldRefund: MANUAL) and
// the run fails, so that the relay can start a new one once it is fixed.
func TestRefundRefusedForGoodIsHeld(t *testing.T) {
	env := newEnv(t)
	in := RefundInput{PaymentID: uuid.MustParse("5f1d0c2a-1b2c-8d3e-8f40-5a6b7c8d9e0f"), ActivityID: 1, SKUID: 2}
	refusal := temporal.NewNonRetryableApplicationError("refund at provider: provider refused the refund: paysim: already refunded", activities.ErrTypeRefused, nil)
	r := steps.Refund{PaymentID: in.PaymentID}
	env.OnActivity(act.BeginRefund, mock.Anything, in.PaymentID).Return(r, nil).Once()
	env.OnActivity(act.RefundAtProvider, mock.Anything, r).Return(refusal).Once()
	env.OnActivity(act.HoldRefund, mock.Anything, mock.MatchedBy(func(h activities.HoldRefundInput) bool {
		return h.PaymentID == in.PaymentID && strings.Contains(h.Reason, "already refunded")
	})).Return(nil).Once()
	env.ExecuteWorkflow(RefundWorkflow, in)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() == nil {
		t.Fatal("refund run did not fail on a refusal")
	}
	env.AssertExpectations(t)
}
