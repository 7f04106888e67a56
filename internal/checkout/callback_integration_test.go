package checkout_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/checkout"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/refundrelay"
	"github.com/seckill/seckill/workflows"
)

var secret = bytes.Repeat([]byte{9}, 32)

// signals records what the service asked Temporal for.
type signals struct {
	mu      sync.Mutex
	signals []string
	starts  []string
	// down makes every workflow start fail (Temporal unreachable).
	down bool
}

func (s *signals) SignalWorkflow(_ context.Context, id, _, name string, _ any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signals = append(s.signals, name+":"+id)
	return nil
}

func (s *signals) SignalWithStartWorkflow(_ context.Context, id, name string, _ any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signals = append(s.signals, name+":"+id)
	return nil, nil
}

func (s *signals) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errors.New("temporal: connection refused")
	}
	s.starts = append(s.starts, o.ID)
	return nil, nil
}

type noProvider struct{ payments.Provider }

func (noProvider) Name() string { return payments.ProviderName }

// Get: this provider confirms nothing.
func (noProvider) Get(context.Context, string) (payments.ProviderPayment, error) {
	return payments.ProviderPayment{}, payments.ErrNoPayment
}

// intentProvider is a provider at which every transaction StartPayment
// created (a payment_intent row) has been paid: it confirms those, with
// their order and amount, and nothing else.
type intentProvider struct {
	noProvider
	pool *pgxpool.Pool
}

func (p intentProvider) Get(ctx context.Context, txn string) (payments.ProviderPayment, error) {
	v := payments.ProviderPayment{TransactionID: txn, Status: "PAID"}
	err := p.pool.QueryRow(ctx, `SELECT order_id, amount_cents, currency FROM payment_intent WHERE provider_transaction_id = $1`, txn).
		Scan(&v.OrderID, &v.AmountCents, &v.Currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return payments.ProviderPayment{}, payments.ErrNoPayment
	}
	return v, err
}

type rig struct {
	pool    *pgxpool.Pool
	svc     *checkout.Service
	tc      *signals
	orderID uuid.UUID
}

func newRig(t *testing.T) *rig {
	t.Helper()
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	orderID := uuid.New()
	mustExec(t, pool, `INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES (1, 'a', now(), now() + interval '1 hour', 900, 300)`)
	mustExec(t, pool, `INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock, occupied_stock)
		VALUES (1, 1, 4999, 10, 9, 1)`)
	mustExec(t, pool, `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at)
		VALUES ($1, 1, 1, 42, $2, $3, 4999, 'PAYING', now() + interval '15 minutes')`, orderID, uuid.New(), uuid.New())
	// The provider transaction StartPayment created for it (what body() pays).
	mustExec(t, pool, `INSERT INTO payment_intent (order_id, provider, provider_transaction_id, amount_cents, currency, status)
		VALUES ($1, $2, $3, 4999, 'CNY', 'OPEN')`, orderID, payments.ProviderName, "txn_"+orderID.String()[:8])
	tc := &signals{}
	svc, err := checkout.NewService(pool, intentProvider{pool: pool}, sagasOf(t, tc), payments.PaysimVerifier(secret, 5*time.Minute),
		"http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{pool: pool, svc: svc, tc: tc, orderID: orderID}
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func body(t *testing.T, orderID uuid.UUID, amount int64) []byte {
	b, err := json.Marshal(paysim.Event{Type: paysim.EventPaymentSucceeded, EventID: "evt_1", TransactionID: "txn_" + orderID.String()[:8],
		MerchantOrderID: orderID, AmountCents: amount, Currency: "CNY", PaidAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func headers(id string, ts time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

// state is everything a callback may change.
func (r *rig) state(t *testing.T) string {
	t.Helper()
	var s string
	if err := r.pool.QueryRow(context.Background(), `
		SELECT o.status || '|' || (SELECT count(*) FROM payment_record) || '|' || (SELECT count(*) FROM payment_callback) || '|' ||
		       (SELECT count(*) FROM event_outbox) || '|' || i.sold_stock
		FROM orders o, sku_inventory i WHERE o.order_id = $1`, r.orderID).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCallbackSecurity(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	now := time.Now()
	good := body(t, r.orderID, 4999)
	before := r.state(t)
	cases := []struct {
		name   string
		h      http.Header
		body   []byte
		status int
	}{
		{"no headers", http.Header{}, good, 401},
		{"bad signature", headers("msg_1", now, paysim.Sign(bytes.Repeat([]byte{1}, 32), "msg_1", now, good)), good, 401},
		{"stale timestamp", headers("msg_1", now.Add(-10*time.Minute), paysim.Sign(secret, "msg_1", now.Add(-10*time.Minute), good)), good, 401},
		{"future timestamp", headers("msg_1", now.Add(10*time.Minute), paysim.Sign(secret, "msg_1", now.Add(10*time.Minute), good)), good, 401},
		{"body tampered", headers("msg_1", now, paysim.Sign(secret, "msg_1", now, good)), bytes.Replace(good, []byte("4999"), []byte("1"), 1), 401},
		{"id swapped", headers("msg_2", now, paysim.Sign(secret, "msg_1", now, good)), good, 401},
		{"signed garbage", headers("msg_3", now, paysim.Sign(secret, "msg_3", now, []byte(`{"type":"x"}`))), []byte(`{"type":"x"}`), 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := r.svc.HandleCallback(ctx, c.h, c.body)
			var ce *checkout.CallbackError
			if !errors.As(err, &ce) || ce.Status != c.status {
				t.Fatalf("HandleCallback = %v, want status %d", err, c.status)
			}
			if after := r.state(t); after != before {
				t.Fatalf("state changed: %s → %s", before, after)
			}
		})
	}
	if len(r.tc.signals) != 0 {
		t.Fatalf("refused callbacks signalled the saga: %v", r.tc.signals)
	}
}

func TestCallbackRecordsOnceAndDuplicatesChangeNothing(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b := body(t, r.orderID, 4999)
	sign := func(id string) http.Header {
		now := time.Now()
		return headers(id, now, paysim.Sign(secret, id, now, b))
	}
	if err := r.svc.HandleCallback(ctx, sign("msg_1"), b); err != nil {
		t.Fatal(err)
	}
	after := r.state(t)
	if after != "PAID|1|1|1|1" {
		t.Fatalf("after payment: %s (want PAID, 1 payment, 1 callback, 1 outbox event, 1 sold)", after)
	}
	// The same delivery again (the provider retries), and the same event under
	// a fresh signature: 2xx and nothing changes.
	for range 3 {
		if err := r.svc.HandleCallback(ctx, sign("msg_1"), b); err != nil {
			t.Fatalf("duplicate: %v", err)
		}
	}
	if err := r.svc.HandleCallback(ctx, sign("msg_9"), b); err != nil {
		t.Fatalf("same payment, new webhook id: %v", err)
	}
	if got := r.state(t); got != "PAID|1|2|1|1" {
		t.Fatalf("duplicates changed state: %s", got)
	}
	// A replayed id with another body is refused.
	other := body(t, r.orderID, 4999)
	now := time.Now()
	err := r.svc.HandleCallback(ctx, headers("msg_1", now, paysim.Sign(secret, "msg_1", now, other)), other)
	var ce *checkout.CallbackError
	if !errors.As(err, &ce) || ce.Code != "WEBHOOK_ID_REUSED" {
		t.Fatalf("reused id with new body = %v", err)
	}
	// An amount the provider does not hold for the transaction: refused as
	// unconfirmed, nothing recorded.
	before := r.state(t)
	wrong := body(t, r.orderID, 1)
	if err := r.svc.HandleCallback(ctx, headers("msg_5", now, paysim.Sign(secret, "msg_5", now, wrong)), wrong); !errors.As(err, &ce) || ce.Code != "PAYMENT_UNCONFIRMED" {
		t.Fatalf("amount the provider does not hold = %v", err)
	}
	// The provider confirms the amount, but it is not the order's: refused
	// as a mismatch, nothing recorded.
	mustExec(t, r.pool, `UPDATE payment_intent SET amount_cents = 1 WHERE order_id = $1`, r.orderID)
	if err := r.svc.HandleCallback(ctx, headers("msg_6", now, paysim.Sign(secret, "msg_6", now, wrong)), wrong); !errors.As(err, &ce) || ce.Code != "PAYMENT_MISMATCH" {
		t.Fatalf("confirmed amount that is not the order's = %v", err)
	}
	mustExec(t, r.pool, `UPDATE payment_intent SET amount_cents = 4999 WHERE order_id = $1`, r.orderID)
	if after := r.state(t); after != before {
		t.Fatalf("refused callbacks changed state:\n%s\n->\n%s", before, after)
	}
}

func TestCallbackForUnknownOrderIsKeptAndNotAcknowledged(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ghost := uuid.New()
	b := body(t, ghost, 4999)
	now := time.Now()
	// The provider does hold a paid transaction for that order id.
	txn := "txn_" + ghost.String()[:8]
	svc, err := checkout.NewService(r.pool, confirmingProvider{paid: map[string]payments.ProviderPayment{
		txn: {TransactionID: txn, OrderID: ghost, AmountCents: 4999, Status: "PAID", PaidAt: now}}}, sagasOf(t, r.tc),
		payments.PaysimVerifier(secret, 5*time.Minute), "http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.svc = svc
	err = r.svc.HandleCallback(ctx, headers("msg_7", now, paysim.Sign(secret, "msg_7", now, b)), b)
	var ce *checkout.CallbackError
	if !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("unknown order = %v, want 404 so the provider retries", err)
	}
	var n, orders int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM payment_callback WHERE webhook_id = 'msg_7' AND result = 'UNKNOWN_ORDER'`).Scan(&n)
	r.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE order_id = $1`, ghost).Scan(&orders)
	if n != 1 || orders != 0 {
		t.Fatalf("kept callbacks %d, orders created %d; want 1 and 0", n, orders)
	}
	// The retry is not mistaken for a duplicate: still refused until the order exists.
	if err := r.svc.HandleCallback(ctx, headers("msg_7", now, paysim.Sign(secret, "msg_7", now, b)), b); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("retry = %v", err)
	}
}

func TestPaymentAfterCancelStartsRefund(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	mustExec(t, r.pool, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, r.orderID)
	b := body(t, r.orderID, 4999)
	now := time.Now()
	if err := r.svc.HandleCallback(ctx, headers("msg_8", now, paysim.Sign(secret, "msg_8", now, b)), b); err != nil {
		t.Fatal(err)
	}
	var status, pay string
	r.pool.QueryRow(ctx, `SELECT o.status, p.status FROM orders o JOIN payment_record p ON p.order_id = o.order_id WHERE o.order_id = $1`, r.orderID).Scan(&status, &pay)
	if status != "CANCELLED" || pay != "SUCCESS" || len(r.tc.starts) != 1 {
		t.Fatalf("order %s payment %s refund starts %v: want CANCELLED, SUCCESS (to refund), one refund workflow", status, pay, r.tc.starts)
	}
}

// Concurrent deliveries of one callback (the provider retries and
// duplicates) and the same payment under fresh webhook ids: one payment, one
// PAID transition, and the saga is signalled once, by the delivery that paid.
func TestConcurrentDuplicateCallbacksApplyAndSignalOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	b := body(t, r.orderID, 4999)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		id := "msg_1"
		if i%8 == 0 {
			id = fmt.Sprintf("msg_fresh_%d", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := time.Now()
			errs <- r.svc.HandleCallback(ctx, headers(id, now, paysim.Sign(secret, id, now, b)), b)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("delivery: %v", err)
		}
	}
	if got := r.state(t); got != "PAID|1|6|1|1" {
		t.Fatalf("state %s, want PAID, 1 payment, 6 callbacks (msg_1 + 5 fresh ids), 1 outbox event, 1 sold", got)
	}
	if len(r.tc.signals) != 1 {
		t.Fatalf("saga signalled %d times (%v), want once", len(r.tc.signals), r.tc.signals)
	}
}

// A payment lands on a cancelled order while Temporal is down: the refund
// obligation is written with the payment, the provider gets 2xx (its retry
// is a duplicate), and the refund relay starts the refund once Temporal is
// back and keeps it owed until FinishRefund.
func TestRefundObligationSurvivesAFailedStart(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	mustExec(t, r.pool, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, r.orderID)
	r.tc.down = true
	b := body(t, r.orderID, 4999)
	for range 2 { // the delivery and the provider's retry
		now := time.Now()
		if err := r.svc.HandleCallback(ctx, headers("msg_8", now, paysim.Sign(secret, "msg_8", now, b)), b); err != nil {
			t.Fatalf("callback while Temporal is down = %v, want 2xx (the refund is owed durably)", err)
		}
	}
	task := func() (status string, attempts int, lastErr *string) {
		t.Helper()
		if err := r.pool.QueryRow(ctx, `SELECT t.status, t.attempt_count, t.last_error FROM refund_task t
			JOIN payment_record p ON p.payment_id = t.payment_id WHERE p.order_id = $1`, r.orderID).Scan(&status, &attempts, &lastErr); err != nil {
			t.Fatalf("refund task: %v", err)
		}
		return
	}
	if st, _, _ := task(); st != "PENDING" {
		t.Fatalf("refund task %s, want PENDING", st)
	}
	relay, err := refundrelay.New(r.pool, r.tc, refundrelay.Options{TaskQueue: "q", BaseBackoff: time.Millisecond}, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Still down: the relay records the failure and keeps the task owed.
	if n, err := relay.Once(ctx); n != 1 || err != nil {
		t.Fatalf("relay claimed %d, %v", n, err)
	}
	if st, attempts, lastErr := task(); st != "PENDING" || attempts != 1 || lastErr == nil {
		t.Fatalf("after a failed start: %s attempts %d error %v", st, attempts, lastErr)
	}
	// Temporal is back.
	r.tc.down = false
	mustExec(t, r.pool, `UPDATE refund_task SET next_attempt_at = now()`)
	if n, err := relay.Once(ctx); n != 1 || err != nil {
		t.Fatalf("relay claimed %d, %v", n, err)
	}
	if st, _, _ := task(); st != "STARTED" || len(r.tc.starts) != 1 || !strings.HasPrefix(r.tc.starts[0], "refund-") {
		t.Fatalf("after Temporal came back: task %s, starts %v", st, r.tc.starts)
	}
	// Not due again before its recheck; once refunded it is done for good.
	if n, _ := relay.Once(ctx); n != 0 {
		t.Fatalf("relay claimed a started refund again at once (%d)", n)
	}
	var pid uuid.UUID
	r.pool.QueryRow(ctx, `SELECT payment_id FROM payment_record WHERE order_id = $1`, r.orderID).Scan(&pid)
	store := payments.NewStore(r.pool, nil)
	ref, _, err := store.BeginRefund(ctx, pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.FinishRefund(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := task(); st != "DONE" {
		t.Fatalf("after the refund: task %s, want DONE", st)
	}
}

// racingProvider runs during while the provider creates the transaction: a
// cancel arriving in the middle of a payment start.
type racingProvider struct {
	noProvider
	during  func()
	creates int
	closed  []string
}

func (p *racingProvider) Create(_ context.Context, orderID uuid.UUID, amount int64, currency, _ string) (payments.ProviderPayment, error) {
	p.creates++
	if p.during != nil {
		p.during()
	}
	return payments.ProviderPayment{TransactionID: "txn_" + orderID.String()[:8], OrderID: orderID, AmountCents: amount, Currency: currency, Status: "PENDING"}, nil
}

func (p *racingProvider) Close(_ context.Context, txn string) (payments.ProviderPayment, error) {
	p.closed = append(p.closed, txn)
	return payments.ProviderPayment{TransactionID: txn, Status: "CLOSED"}, nil
}

// The saga's cancel and the buyer's payment start cross: the cancel waits
// while the provider transaction is being created (PAYMENT_STARTING), so
// the buyer gets a transaction only for an order that is still PAYING; a
// start that lost the race (its guard gone stale) has its transaction closed
// and never handed out; and no new transaction is created once the order is
// CANCEL_PENDING.
func TestNoProviderTransactionForAnOrderBeingCancelled(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	store := payments.NewStore(r.pool, nil)
	prov := &racingProvider{}
	svc, err := checkout.NewService(r.pool, prov, sagasOf(t, r.tc), payments.PaysimVerifier(secret, 5*time.Minute),
		"http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var during state.Cancel
	prov.during = func() {
		st, err := store.BeginCancel(ctx, r.orderID, false)
		if err != nil {
			t.Error(err)
		}
		during = st
	}
	p, err := svc.StartPayment(ctx, 42, r.orderID)
	if err != nil || p.TransactionID == "" {
		t.Fatalf("start payment = %+v, %v", p, err)
	}
	if during != state.CancelPaymentStarting {
		t.Fatalf("a cancel during the provider call = %s, want %s (it must wait)", during, state.CancelPaymentStarting)
	}
	var intent string
	r.pool.QueryRow(ctx, `SELECT status FROM payment_intent WHERE order_id = $1`, r.orderID).Scan(&intent)
	if st, _ := store.Status(ctx, r.orderID); st != state.OrderPaying || intent != "OPEN" {
		t.Fatalf("order %s intent %s, want PAYING with an OPEN intent", st, intent)
	}
	// Now the cancel goes through, and a new payment start is refused
	// without asking the provider.
	if st, err := store.BeginCancel(ctx, r.orderID, false); err != nil || st != state.CancelFound(state.OrderCancelPending) {
		t.Fatalf("cancel = %s, %v", st, err)
	}
	prov.during, prov.creates = nil, 0
	var se *checkout.StateError
	if _, err := svc.StartPayment(ctx, 42, r.orderID); !errors.As(err, &se) || prov.creates != 0 {
		t.Fatalf("start payment of a CANCEL_PENDING order = %v with %d provider creates", err, prov.creates)
	}

	// A start whose guard went stale (a slow provider) loses to the cancel:
	// its transaction is closed, never handed out.
	other := uuid.New()
	mustExec(t, r.pool, `INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at)
		VALUES ($1, 1, 2, 42, $2, $3, 4999, 'CREATED', now() + interval '15 minutes')`, other, uuid.New(), uuid.New())
	prov.during = func() {
		mustExec(t, r.pool, `UPDATE payment_intent SET updated_at = now() - interval '1 minute' WHERE order_id = $1`, other)
		if st, _ := store.BeginCancel(ctx, other, false); st != state.CancelFound(state.OrderCancelPending) {
			t.Errorf("cancel past a stale start = %s", st)
		}
	}
	if p, err := svc.StartPayment(ctx, 42, other); !errors.As(err, &se) || p.TransactionID != "" {
		t.Fatalf("start that lost to the cancel = %+v, %v; want a state error and no transaction", p, err)
	}
	if len(prov.closed) != 1 {
		t.Fatalf("transactions closed at the provider: %v, want the one created for the cancelled order", prov.closed)
	}
	r.pool.QueryRow(ctx, `SELECT status FROM payment_intent WHERE order_id = $1`, other).Scan(&intent)
	if intent != "CLOSED" {
		t.Fatalf("intent of the cancelled order = %s, want CLOSED", intent)
	}
}

// confirmingProvider confirms the transactions it holds, as the provider
// answers GET /payments/{txn}.
type confirmingProvider struct {
	noProvider
	paid map[string]payments.ProviderPayment
}

// Get answers from paid; a payment that names no currency is in CNY.
func (p confirmingProvider) Get(_ context.Context, txn string) (payments.ProviderPayment, error) {
	if v, ok := p.paid[txn]; ok {
		v.Currency = cmp.Or(v.Currency, "CNY")
		return v, nil
	}
	return payments.ProviderPayment{}, payments.ErrNoPayment
}

// A callback is bound to its payment: a correctly signed callback for a
// transaction this system did not start for the order, which the provider
// does not confirm, is refused and changes nothing (whoever holds the
// webhook secret cannot pay an order by saying so). One the provider
// confirms (paid in another channel) is accepted; as the order is paid
// already, that second payment is owed back.
func TestCallbackIsBoundToItsPayment(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	forged := func(txn string, amount int64) []byte {
		b, _ := json.Marshal(paysim.Event{Type: paysim.EventPaymentSucceeded, EventID: "evt_" + txn, TransactionID: txn,
			MerchantOrderID: r.orderID, AmountCents: amount, Currency: "CNY", PaidAt: time.Now().UTC()})
		return b
	}
	before := r.state(t)
	b := forged("txn_made_up", 4999)
	now := time.Now()
	err := r.svc.HandleCallback(ctx, headers("msg_forged", now, paysim.Sign(secret, "msg_forged", now, b)), b)
	var ce *checkout.CallbackError
	if !errors.As(err, &ce) || ce.Code != "PAYMENT_UNCONFIRMED" || ce.Status != http.StatusConflict {
		t.Fatalf("unbound, unconfirmed callback = %v, want 409 PAYMENT_UNCONFIRMED", err)
	}
	if after := r.state(t); after != before {
		t.Fatalf("a refused callback changed state: %s → %s", before, after)
	}
	// The order is paid through its own transaction.
	own := body(t, r.orderID, 4999)
	if err := r.svc.HandleCallback(ctx, headers("msg_own", now, paysim.Sign(secret, "msg_own", now, own)), own); err != nil {
		t.Fatal(err)
	}
	// A second transaction the provider confirms for this order and amount.
	prov := confirmingProvider{paid: map[string]payments.ProviderPayment{
		"txn_other_channel": {TransactionID: "txn_other_channel", OrderID: r.orderID, AmountCents: 4999, Status: "PAID", PaidAt: time.Now()},
		"txn_wrong_amount":  {TransactionID: "txn_wrong_amount", OrderID: r.orderID, AmountCents: 1, Status: "PAID", PaidAt: time.Now()},
	}}
	svc, err := checkout.NewService(r.pool, prov, sagasOf(t, r.tc), payments.PaysimVerifier(secret, 5*time.Minute),
		"http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	wrong := forged("txn_wrong_amount", 4999)
	if err := svc.HandleCallback(ctx, headers("msg_wrong", now, paysim.Sign(secret, "msg_wrong", now, wrong)), wrong); !errors.As(err, &ce) || ce.Code != "PAYMENT_UNCONFIRMED" {
		t.Fatalf("callback whose amount the provider contradicts = %v", err)
	}
	other := forged("txn_other_channel", 4999)
	if err := svc.HandleCallback(ctx, headers("msg_other", now, paysim.Sign(secret, "msg_other", now, other)), other); err != nil {
		t.Fatalf("provider-confirmed second payment = %v", err)
	}
	var status string
	var payments_, owed int
	r.pool.QueryRow(ctx, `SELECT o.status, (SELECT count(*) FROM payment_record WHERE order_id = o.order_id),
		(SELECT count(*) FROM refund_task WHERE order_id = o.order_id) FROM orders o WHERE o.order_id = $1`, r.orderID).Scan(&status, &payments_, &owed)
	if status != "PAID" || payments_ != 2 || owed != 1 {
		t.Fatalf("order %s with %d payments, %d refunds owed; want PAID, 2, 1 (the second payment goes back)", status, payments_, owed)
	}
	// The owed payment is the second one, and it can be refunded while the order stays PAID.
	var pid uuid.UUID
	r.pool.QueryRow(ctx, `SELECT payment_id FROM refund_task WHERE order_id = $1`, r.orderID).Scan(&pid)
	if pid != payments.PaymentID(payments.ProviderName, "txn_other_channel") {
		t.Fatalf("refund owed for %s, want the second payment", pid)
	}
	store := payments.NewStore(r.pool, nil)
	ref, _, err := store.BeginRefund(ctx, pid)
	if err != nil {
		t.Fatalf("refund of the second payment of a paid order: %v", err)
	}
	if err := store.FinishRefund(ctx, ref); err != nil {
		t.Fatal(err)
	}
	r.pool.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, r.orderID).Scan(&status)
	if status != "PAID" {
		t.Fatalf("order after refunding its second payment: %s, want PAID", status)
	}
	if _, _, err := store.BeginRefund(ctx, payments.PaymentID(payments.ProviderName, "txn_"+r.orderID.String()[:8])); err == nil {
		t.Fatal("the payment that paid the order was refundable")
	}
}

// Even the transaction StartPayment created for the order pays it only when
// the provider says it is paid: a signed callback for it while the provider
// holds it PENDING (the webhook secret leaked, the buyer never paid) is
// refused and changes nothing, and so is one the provider holds REFUNDED
// while the order is still open.
func TestCallbackForTheOrdersOwnTransactionNeedsTheProvider(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	txn := "txn_" + r.orderID.String()[:8]
	for i, status := range []payments.ProviderStatus{"PENDING", "CLOSED", "REFUNDED"} {
		svc, err := checkout.NewService(r.pool, confirmingProvider{paid: map[string]payments.ProviderPayment{
			txn: {TransactionID: txn, OrderID: r.orderID, AmountCents: 4999, Status: status}}}, sagasOf(t, r.tc),
			payments.PaysimVerifier(secret, 5*time.Minute), "http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			t.Fatal(err)
		}
		before := r.state(t)
		b := body(t, r.orderID, 4999)
		id := fmt.Sprintf("msg_own_%d", i)
		now := time.Now()
		err = svc.HandleCallback(ctx, headers(id, now, paysim.Sign(secret, id, now, b)), b)
		var ce *checkout.CallbackError
		if !errors.As(err, &ce) || ce.Code != "PAYMENT_UNCONFIRMED" {
			t.Fatalf("provider says %s: callback = %v, want 409 PAYMENT_UNCONFIRMED", status, err)
		}
		if after := r.state(t); after != before {
			t.Fatalf("provider says %s: the refused callback changed state:\n%s\n->\n%s", status, before, after)
		}
	}
	// Paid at the provider: accepted.
	b := body(t, r.orderID, 4999)
	now := time.Now()
	if err := r.svc.HandleCallback(ctx, headers("msg_paid", now, paysim.Sign(secret, "msg_paid", now, b)), b); err != nil {
		t.Fatalf("paid at the provider: %v", err)
	}
	var status string
	if err := r.pool.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, r.orderID).Scan(&status); err != nil || status != "PAID" {
		t.Fatalf("order %s (%v), want PAID", status, err)
	}
}

// sagasOf is the service's view of the (fake) Temporal client tc.
func sagasOf(t *testing.T, tc workflows.Temporal) *workflows.Sagas {
	t.Helper()
	s, err := workflows.NewSagas(tc, "q")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countingProvider counts the provider lookups and fails them while down.
type countingProvider struct {
	intentProvider
	gets atomic.Int64
	down atomic.Bool
}

func (p *countingProvider) Get(ctx context.Context, txn string) (payments.ProviderPayment, error) {
	p.gets.Add(1)
	if p.down.Load() {
		return payments.ProviderPayment{}, errors.New("provider: connection refused")
	}
	return p.intentProvider.Get(ctx, txn)
}

// A delivery already applied is answered from PostgreSQL before the provider
// is asked: replays cost no provider call and succeed while it is down; a
// reused id with another body is refused the same way.
func TestDuplicateCallbackIsDedupedBeforeTheProviderLookup(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	prov := &countingProvider{intentProvider: intentProvider{pool: r.pool}}
	svc, err := checkout.NewService(r.pool, prov, sagasOf(t, r.tc), payments.PaysimVerifier(secret, 5*time.Minute),
		"http://127.0.0.1/cb", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := body(t, r.orderID, 4999)
	sign := func(id string, body []byte) http.Header {
		now := time.Now()
		return headers(id, now, paysim.Sign(secret, id, now, body))
	}
	if err := svc.HandleCallback(ctx, sign("msg_1", b), b); err != nil {
		t.Fatal(err)
	}
	if n := prov.gets.Load(); n != 1 {
		t.Fatalf("first delivery asked the provider %d times, want 1", n)
	}
	prov.down.Store(true)
	for range 5 {
		if err := svc.HandleCallback(ctx, sign("msg_1", b), b); err != nil {
			t.Fatalf("replayed delivery while the provider is down = %v, want 2xx from PostgreSQL", err)
		}
	}
	other := body(t, r.orderID, 4999)
	var ce *checkout.CallbackError
	if err := svc.HandleCallback(ctx, sign("msg_1", other), other); !errors.As(err, &ce) || ce.Code != "WEBHOOK_ID_REUSED" {
		t.Fatalf("reused id with another body = %v", err)
	}
	if n := prov.gets.Load(); n != 1 {
		t.Fatalf("replays asked the provider %d more times, want none", n-1)
	}
	if got := r.state(t); got != "PAID|1|1|1|1" {
		t.Fatalf("replays changed state: %s", got)
	}
	// A new webhook id does need the provider: down, it is a retry, not a 2xx.
	if err := svc.HandleCallback(ctx, sign("msg_2", b), b); err == nil || errors.As(err, &ce) {
		t.Fatalf("new delivery while the provider is down = %v, want a retryable error", err)
	}
}

// A payment is bound to the order's currency as well as its amount: a
// signed callback for 4999 JPY, which the provider confirms as 4999 JPY, does
// not pay an order of 4999 CNY (409 PAYMENT_MISMATCH, nothing written), and
// the same payment in CNY does.
func TestCallbackIsBoundToTheOrdersCurrency(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	now := time.Now().UTC()
	pay := func(txn, currency string) []byte {
		b, _ := json.Marshal(paysim.Event{Type: paysim.EventPaymentSucceeded, EventID: "evt_" + txn, TransactionID: txn,
			MerchantOrderID: r.orderID, AmountCents: 4999, Currency: currency, PaidAt: now})
		return b
	}
	svc, err := checkout.NewService(r.pool, confirmingProvider{paid: map[string]payments.ProviderPayment{
		"txn_yen":  {TransactionID: "txn_yen", OrderID: r.orderID, AmountCents: 4999, Currency: "JPY", Status: "PAID", PaidAt: now},
		"txn_yuan": {TransactionID: "txn_yuan", OrderID: r.orderID, AmountCents: 4999, Currency: "CNY", Status: "PAID", PaidAt: now},
	}}, sagasOf(t, r.tc), payments.PaysimVerifier(secret, 5*time.Minute), "http://127.0.0.1/cb",
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := r.state(t)
	yen := pay("txn_yen", "JPY")
	var ce *checkout.CallbackError
	if err := svc.HandleCallback(ctx, headers("msg_yen", now, paysim.Sign(secret, "msg_yen", now, yen)), yen); !errors.As(err, &ce) ||
		ce.Code != "PAYMENT_MISMATCH" || ce.Status != http.StatusConflict {
		t.Fatalf("callback in another currency = %v, want 409 PAYMENT_MISMATCH", err)
	}
	if after := r.state(t); after != before {
		t.Fatalf("a payment in another currency changed state: %s → %s", before, after)
	}
	// The payment store refuses it too, whoever brings the evidence (the saga's poll).
	if _, err := payments.NewStore(r.pool, nil).Record(ctx, steps.Evidence{OrderID: r.orderID, Provider: payments.ProviderName,
		TransactionID: "txn_yen", AmountCents: 4999, Currency: "JPY", PaidAt: now}); !errors.Is(err, payments.ErrAmountMismatch) {
		t.Fatalf("evidence in another currency = %v, want ErrAmountMismatch", err)
	}
	yuan := pay("txn_yuan", "CNY")
	if err := svc.HandleCallback(ctx, headers("msg_yuan", now, paysim.Sign(secret, "msg_yuan", now, yuan)), yuan); err != nil {
		t.Fatalf("callback in the order's currency = %v", err)
	}
	var status, currency string
	if err := r.pool.QueryRow(ctx, `SELECT o.status, p.currency FROM orders o JOIN payment_record p ON p.payment_id = o.payment_id
		WHERE o.order_id = $1`, r.orderID).Scan(&status, &currency); err != nil || status != "PAID" || currency != "CNY" {
		t.Fatalf("order %s paid in %s (%v), want PAID in CNY", status, currency, err)
	}
}
