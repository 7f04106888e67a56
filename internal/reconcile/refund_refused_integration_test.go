package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/refundrelay"
)

// recordingStarter records the refund workflows the relay starts.
type recordingStarter struct {
	mu  sync.Mutex
	ids []string
}

func (s *recordingStarter) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, o.ID)
	return nil, nil
}

func refusal(t *testing.T, what string, err error) {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != activities.ErrTypeRefused {
		t.Fatalf("%s: %v, want a non-retryable %s", what, err, activities.ErrTypeRefused)
	}
}

// A refund that can never pass is not retried for ever: the provider's
// refusal (the payment was refunded by hand with another refund id) and a
// refund of the payment that paid its order are non-retryable refusals;
// HoldRefund takes the task out of the relay's hands (MANUAL), and
// reconciliation reports it for a person instead of making it due again.
func TestRefundRefusedForGoodIsHeldForAPerson(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	pc, acts := paysimActivities(t, r)
	store := activities.PaymentStore(acts)
	pay := func(user int64, cancelled bool) (uuid.UUID, uuid.UUID) {
		m := r.reserve(t, user)
		res, err := acts.CreateOrder(ctx, m)
		if err != nil || res.Outcome != steps.OutcomeCreated {
			t.Fatal(res, err)
		}
		if cancelled {
			r.exec(t, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, res.OrderID)
		}
		p, err := pc.Create(ctx, res.OrderID, 100, "CNY", "http://127.0.0.1:1/x")
		if err != nil {
			t.Fatal(err)
		}
		paid, err := pc.Pay(ctx, p.TransactionID, paysim.PayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Record(ctx, steps.Evidence{OrderID: res.OrderID, Provider: payments.ProviderName, TransactionID: p.TransactionID,
			AmountCents: 100, PaidAt: *paid.PaidAt}); err != nil {
			t.Fatal(err)
		}
		var pid uuid.UUID
		if err := r.pool.QueryRow(ctx, `SELECT payment_id FROM payment_record WHERE order_id = $1`, res.OrderID).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if cancelled { // someone refunded it at the provider with another refund id
			if _, err := pc.Refund(ctx, p.TransactionID, "refund-by-hand", 0); err != nil {
				t.Fatal(err)
			}
		}
		return res.OrderID, pid
	}

	// The payment that paid its order is never refunded.
	_, kept := pay(1, false)
	_, err := acts.BeginRefund(ctx, kept)
	refusal(t, "refund of the payment that paid its order", err)

	// The provider refuses the refund of a payment refunded by hand.
	_, late := pay(2, true)
	refund, err := acts.BeginRefund(ctx, late)
	if err != nil {
		t.Fatal(err)
	}
	refusal(t, "refund at the provider of a payment refunded by hand", acts.RefundAtProvider(ctx, refund))
	if err := acts.HoldRefund(ctx, activities.HoldRefundInput{PaymentID: late, Reason: "provider refused"}); err != nil {
		t.Fatal(err)
	}
	var status, lastErr string
	if err := r.pool.QueryRow(ctx, `SELECT status, last_error FROM refund_task WHERE payment_id = $1`, late).Scan(&status, &lastErr); err != nil {
		t.Fatal(err)
	}
	if status != "MANUAL" || lastErr != "provider refused" {
		t.Fatalf("refund task %s (%q), want MANUAL with the reason", status, lastErr)
	}

	// The relay no longer starts it.
	r.exec(t, `UPDATE refund_task SET next_attempt_at = now() - interval '1 minute'`)
	st := &recordingStarter{}
	relay, err := refundrelay.New(r.pool, st, refundrelay.Options{TaskQueue: "q"}, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Once(ctx); err != nil || n != 0 || len(st.ids) != 0 {
		t.Fatalf("relay claimed %d (%v) and started %v, want nothing", n, err, st.ids)
	}

	// Reconciliation reports it for a person and leaves it MANUAL.
	r.exec(t, `UPDATE payment_record SET updated_at = now() - interval '1 minute'`)
	rec, err := reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, nil), metrics.NewReconcile(prometheus.NewRegistry()), quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	var manual bool
	for _, a := range rep.Anomalies {
		manual = manual || (a.Type == reconcile.RefundOwed && a.Object == "payment:"+late.String() && a.Action == reconcile.ActionManual)
	}
	if !manual {
		t.Fatalf("held refund not reported for a person: %+v", rep.Anomalies)
	}
	if err := r.pool.QueryRow(ctx, `SELECT status FROM refund_task WHERE payment_id = $1`, late).Scan(&status); err != nil || status != "MANUAL" {
		t.Fatalf("refund task after reconciliation %s (%v), want MANUAL", status, err)
	}
}
