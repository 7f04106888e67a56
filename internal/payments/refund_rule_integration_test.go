package payments_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// paidBy is whose payment an order's payment_id names.
type paidBy string

const (
	byNone  paidBy = ""      // payment_id NULL
	bySelf  paidBy = "self"  // the payment under test paid the order
	byOther paidBy = "other" // another payment paid the order
)

// ruleCases pin "this payment must be refunded" (seckill_refund_owed,
// migrations/00013_refund_rule.sql): the payment's status, its order's
// status and which payment paid the order.
var ruleCases = []struct {
	payment state.Payment
	order   state.Order
	by      paidBy
	owed    bool
}{
	{state.PaymentSuccess, state.OrderCreated, byNone, false},
	{state.PaymentSuccess, state.OrderPaying, byNone, false},
	{state.PaymentSuccess, state.OrderCancelPending, byNone, false},
	{state.PaymentSuccess, state.OrderPaid, bySelf, false},
	{state.PaymentSuccess, state.OrderPaid, byNone, false}, // a PAID row older than orders.payment_id keeps it
	{state.PaymentSuccess, state.OrderPaid, byOther, true}, // a second payment of a paid order
	{state.PaymentSuccess, state.OrderCancelled, byNone, true},
	{state.PaymentSuccess, state.OrderRefunding, byNone, true},
	{state.PaymentSuccess, state.OrderRefunded, byNone, true},
	{state.PaymentRefunding, state.OrderCreated, byNone, false},
	{state.PaymentRefunding, state.OrderPaid, bySelf, false},
	{state.PaymentRefunding, state.OrderPaid, byOther, true},
	{state.PaymentRefunding, state.OrderCancelled, byNone, true},
	{state.PaymentRefunding, state.OrderRefunding, byNone, true},
	{state.PaymentRefunding, state.OrderRefunded, byNone, true},
	{state.PaymentRefunded, state.OrderPaid, byOther, false}, // given back already
	{state.PaymentRefunded, state.OrderCancelled, byNone, false},
	{state.PaymentRefunded, state.OrderRefunding, byNone, false},
	{state.PaymentRefunded, state.OrderRefunded, byNone, false},
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestRefundRule: seckill_refund_owed answers the table.
func TestRefundRule(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	self, other := uuid.New(), uuid.New()
	for _, c := range ruleCases {
		var orderPayment *uuid.UUID
		switch c.by {
		case bySelf:
			orderPayment = &self
		case byOther:
			orderPayment = &other
		}
		var owed *bool
		if err := pool.QueryRow(ctx, `SELECT seckill_refund_owed($1, $2, $3, $4)`, self, c.payment, c.order, orderPayment).Scan(&owed); err != nil {
			t.Fatal(err)
		}
		if owed == nil || *owed != c.owed {
			t.Errorf("payment %s, order %s paid by %q: owed = %v, want %v", c.payment, c.order, c.by, owed, c.owed)
		}
	}
}

// ruleRows writes each case's order and payment as PostgreSQL would hold
// them (last changed a minute ago) and returns each case's payment_id.
func ruleRows(t *testing.T, pool *pgxpool.Pool, activityID int64) []uuid.UUID {
	t.Helper()
	legacyRows(t, pool)
	ids := make([]uuid.UUID, len(ruleCases))
	for i, c := range ruleCases {
		orderID, pid, otherID := uuid.New(), uuid.New(), uuid.New()
		var orderPayment *uuid.UUID
		switch c.by {
		case bySelf:
			orderPayment = &pid
		case byOther:
			orderPayment = &otherID
		}
		exec(t, pool, `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at, payment_id)
			VALUES ($1, $2, 1, $3, gen_random_uuid(), gen_random_uuid(), 100, $4, now() + interval '1 hour', $5)`, orderID, activityID, i+1, c.order, orderPayment)
		exec(t, pool, `INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, currency, status, paid_at)
			VALUES ($1, $2, 'paysim', $3, 100, 'CNY', $4, now())`, pid, orderID, "txn_"+pid.String(), c.payment)
		if c.by == byOther {
			exec(t, pool, `INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, currency, status, paid_at)
				VALUES ($1, $2, 'paysim', $3, 100, 'CNY', 'SUCCESS', now())`, otherID, orderID, "txn_"+otherID.String())
		}
		ids[i] = pid
	}
	exec(t, pool, `UPDATE payment_record SET updated_at = now() - interval '1 minute'`)
	return ids
}

// TestRefundRuleCallers: reconciliation writes a refund obligation, and
// BeginRefund starts a refund, for exactly the payments the rule owes (the
// refund start acting on SUCCESS payments only, returning any other as is).
func TestRefundRuleCallers(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	activityID := testenv.ActivityID()
	ids := ruleRows(t, pool, activityID)

	rec, err := reconcile.New(pool, rdb, testenv.Stores(t, pool, rdb, nil), metrics.NewReconcile(prometheus.NewRegistry()), quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // step past the 1 ms watermark
	if _, err := rec.Run(ctx, activityID); err != nil {
		t.Fatal(err)
	}
	for i, c := range ruleCases {
		var tasks int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM refund_task WHERE payment_id = $1`, ids[i]).Scan(&tasks); err != nil {
			t.Fatal(err)
		}
		if (tasks == 1) != c.owed {
			t.Errorf("reconciliation: payment %s, order %s paid by %q: %d refund tasks, want owed = %v", c.payment, c.order, c.by, tasks, c.owed)
		}
	}

	store := payments.NewStore(pool, nil)
	for i, c := range ruleCases {
		name := fmt.Sprintf("BeginRefund: payment %s, order %s paid by %q", c.payment, c.order, c.by)
		r, status, err := store.BeginRefund(ctx, ids[i])
		switch {
		case c.payment != state.PaymentSuccess:
			if err != nil || status != c.payment {
				t.Errorf("%s = %s, %v; want %s as is", name, status, err, c.payment)
			}
		case c.owed:
			if err != nil || status != state.PaymentRefunding || r.PaymentID != ids[i] || r.AmountCents != 100 {
				t.Errorf("%s = %+v, %s, %v; want REFUNDING", name, r, status, err)
			}
		case c.order == state.OrderPaid:
			if !errors.Is(err, payments.ErrNotRefundable) {
				t.Errorf("%s = %s, %v; want ErrNotRefundable", name, status, err)
			}
		default:
			if err == nil || errors.Is(err, payments.ErrNotRefundable) {
				t.Errorf("%s = %s, %v; want an error to retry", name, status, err)
			}
		}
		var now state.Payment
		if err := pool.QueryRow(ctx, `SELECT status FROM payment_record WHERE payment_id = $1`, ids[i]).Scan(&now); err != nil {
			t.Fatal(err)
		}
		want := c.payment
		if c.owed && c.payment == state.PaymentSuccess {
			want = state.PaymentRefunding
		}
		if now != want {
			t.Errorf("%s: payment now %s, want %s", name, now, want)
		}
	}
}

// TestRefundRuleRecord: the callback path (Record → RecordTx) writes a refund
// obligation exactly when the rule owes the payment on the order as the
// transaction left it, for a SUCCESS payment; each outcome that means
// "owed back" comes with its task.
func TestRefundRuleRecord(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	activityID := testenv.ActivityID()
	exec(t, pool, `INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES ($1, 'rule', now() - interval '1 hour', now() + interval '1 hour', 900, 300)`, activityID)
	exec(t, pool, `INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock, occupied_stock)
		VALUES ($1, 1, 100, 100, 0, 100)`, activityID)
	legacyRows(t, pool)
	store := payments.NewStore(pool, nil)
	cases := []struct {
		name    string
		order   state.Order
		by      paidBy
		payment state.Payment // the payment already recorded ("" none): a repeated callback
		outcome steps.RecordOutcome
		owed    bool
	}{
		{"created", state.OrderCreated, byNone, state.Payment{}, steps.RecordPaid, false},
		{"paying", state.OrderPaying, byNone, state.Payment{}, steps.RecordPaid, false},
		{"cancel pending", state.OrderCancelPending, byNone, state.Payment{}, steps.RecordPaid, false},
		{"paid, repeated callback", state.OrderPaid, bySelf, state.PaymentSuccess, steps.RecordAlreadyPaid, false},
		{"paid by another", state.OrderPaid, byOther, state.Payment{}, steps.RecordDuplicatePayment, true},
		{"paid by another, repeated callback", state.OrderPaid, byOther, state.PaymentSuccess, steps.RecordDuplicatePayment, true},
		{"paid, no payment_id", state.OrderPaid, byNone, state.Payment{}, steps.RecordAlreadyPaid, false},
		{"cancelled", state.OrderCancelled, byNone, state.Payment{}, steps.RecordPaidAfterCancel, true},
		{"cancelled, repeated callback", state.OrderCancelled, byNone, state.PaymentSuccess, steps.RecordPaidAfterCancel, true},
		{"refunding", state.OrderRefunding, byNone, state.Payment{}, steps.RecordAlreadyRefunding, true},
		{"refunded", state.OrderRefunded, byNone, state.Payment{}, steps.RecordAlreadyRefunding, true},
		// Its refund begun (and its task gone): RecordTx writes none, the
		// refund start and reconciliation see to it.
		{"refunding, repeated callback of a refunding payment", state.OrderRefunding, byNone, state.PaymentRefunding, steps.RecordAlreadyRefunding, false},
		{"refunded, repeated callback of a refunded payment", state.OrderRefunded, byNone, state.PaymentRefunded, steps.RecordAlreadyRefunding, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orderID, txn := uuid.New(), fmt.Sprintf("txn_rule_%d", i)
			pid := payments.PaymentID(payments.ProviderName, txn)
			var orderPayment *uuid.UUID
			other := uuid.New()
			switch c.by {
			case bySelf:
				orderPayment = &pid
			case byOther:
				orderPayment = &other
			}
			exec(t, pool, `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at, payment_id)
				VALUES ($1, $2, 1, $3, gen_random_uuid(), gen_random_uuid(), 100, $4, now() + interval '1 hour', $5)`, orderID, activityID, i+1, c.order, orderPayment)
			if !c.payment.IsZero() {
				exec(t, pool, `INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, currency, status, paid_at)
					VALUES ($1, $2, $3, $4, 100, 'CNY', $5, now())`, pid, orderID, payments.ProviderName, txn, c.payment)
			}
			res, err := store.Record(ctx, steps.Evidence{OrderID: orderID, Provider: payments.ProviderName, TransactionID: txn, AmountCents: 100, PaidAt: time.Now()})
			if err != nil || res.Outcome != c.outcome || res.PaymentID != pid {
				t.Fatalf("Record = %+v, %v; want %s", res, err, c.outcome)
			}
			var tasks int
			var owed bool
			if err := pool.QueryRow(ctx, `
				SELECT (SELECT count(*) FROM refund_task WHERE payment_id = p.payment_id),
				       seckill_refund_owed(p.payment_id, p.status, o.status, o.payment_id) AND p.status = 'SUCCESS'
				FROM payment_record p JOIN orders o ON o.order_id = p.order_id WHERE p.payment_id = $1`, pid).Scan(&tasks, &owed); err != nil {
				t.Fatal(err)
			}
			if (tasks == 1) != c.owed || owed != c.owed {
				t.Errorf("%d refund tasks, rule owes a SUCCESS payment: %v; want owed = %v", tasks, owed, c.owed)
			}
		})
	}
}

// legacyRows lets this test's database hold a PAID order without a
// payment_id, as a row older than 00006_payment_binding may (its constraint
// is NOT VALID: old rows are not checked, new ones are).
func legacyRows(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	exec(t, pool, `ALTER TABLE orders DROP CONSTRAINT orders_paid_has_payment`)
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
