package checkout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// fakeSagas records what the service asks of the sagas.
type fakeSagas struct {
	paid    []string // reservation id/transaction id
	refunds []uuid.UUID
	err     error // what every call answers
}

func (f *fakeSagas) Cancel(context.Context, events.OrderCreateRequested, string) error { return f.err }
func (f *fakeSagas) Paid(_ context.Context, rid uuid.UUID, txn string) error {
	f.paid = append(f.paid, rid.String()+"/"+txn)
	return f.err
}
func (f *fakeSagas) StartRefund(_ context.Context, pid uuid.UUID, _, _ int64) error {
	f.refunds = append(f.refunds, pid)
	return f.err
}

func TestRecorded(t *testing.T) {
	rid, pid := uuid.New(), uuid.New()
	cb := CallbackBody{TransactionID: "txn_1", MerchantOrderID: uuid.New()}
	tests := []struct {
		outcome   steps.RecordOutcome
		label     string
		signalled bool
		refunded  bool
	}{
		{steps.RecordPaid, "paid", true, false},
		{steps.RecordAlreadyPaid, "already_paid", false, false},
		{steps.RecordPaidAfterCancel, "paid_after_cancel", false, true},
		{steps.RecordAlreadyRefunding, "already_refunding", false, true},
		{steps.RecordDuplicatePayment, "duplicate_payment", false, true},
	}
	for _, sagaErr := range []error{nil, errors.New("temporal down")} {
		for _, tt := range tests {
			reg := prometheus.NewRegistry()
			sagas := &fakeSagas{err: sagaErr}
			s := &Service{sagas: sagas, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now, m: metrics.NewSaga(reg)}
			s.recorded(context.Background(), "msg_1", cb, steps.RecordResult{Outcome: tt.outcome, PaymentID: pid, ReservationID: rid})
			if got := len(sagas.paid) == 1 && sagas.paid[0] == rid.String()+"/txn_1"; got != tt.signalled || (!tt.signalled && len(sagas.paid) > 0) {
				t.Errorf("%s: saga told paid %v, want %v", tt.outcome, sagas.paid, tt.signalled)
			}
			if got := len(sagas.refunds) == 1 && sagas.refunds[0] == pid; got != tt.refunded || (!tt.refunded && len(sagas.refunds) > 0) {
				t.Errorf("%s: refunds started %v, want %v", tt.outcome, sagas.refunds, tt.refunded)
			}
			if n := paymentCount(t, reg, tt.label); n != 1 {
				t.Errorf("%s: seckill_payment_total{result=%q} = %v, want 1", tt.outcome, tt.label, n)
			}
		}
	}
}

func paymentCount(t *testing.T, reg *prometheus.Registry, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "seckill_payment_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestCancelRefusal(t *testing.T) {
	for _, st := range []string{state.OrderCreated.String(), state.OrderPaying.String()} {
		if err := cancelRefusal(st); err != nil {
			t.Errorf("cancelRefusal(%s) = %v, want nil", st, err)
		}
	}
	for _, st := range []string{state.OrderCancelPending.String(), state.OrderPaid.String(), state.OrderCancelled.String(), state.OrderRefunding.String(), state.OrderRefunded.String()} {
		var se *StateError
		if err := cancelRefusal(st); !errors.As(err, &se) || se.Op != "cancel" || se.Status != st {
			t.Errorf("cancelRefusal(%s) = %v, want a StateError", st, err)
		}
	}
}
