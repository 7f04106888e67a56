package checkout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/checkout"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/paysim"
)

var secret = bytes.Repeat([]byte{9}, 32)

// signals records what the service asked Temporal for.
type signals struct {
	mu      sync.Mutex
	signals []string
	starts  []string
}

func (s *signals) SignalWorkflow(_ context.Context, id, _, name string, _ any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signals = append(s.signals, name+":"+id)
	return nil
}

func (s *signals) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts = append(s.starts, o.ID)
	return nil, nil
}

type noProvider struct{ payments.Provider }

func (noProvider) Name() string { return payments.ProviderName }

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
	tc := &signals{}
	svc, err := checkout.NewService(pool, noProvider{}, tc, "q", payments.PaysimVerifier(secret, 5*time.Minute),
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
		MerchantOrderID: orderID, AmountCents: amount, PaidAt: time.Now().UTC()})
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
	// Wrong amount for a known order: refused, nothing recorded.
	wrong := body(t, r.orderID, 1)
	if err := r.svc.HandleCallback(ctx, headers("msg_5", now, paysim.Sign(secret, "msg_5", now, wrong)), wrong); !errors.As(err, &ce) || ce.Code != "PAYMENT_MISMATCH" {
		t.Fatalf("wrong amount = %v", err)
	}
}

func TestCallbackForUnknownOrderIsKeptAndNotAcknowledged(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ghost := uuid.New()
	b := body(t, ghost, 4999)
	now := time.Now()
	err := r.svc.HandleCallback(ctx, headers("msg_7", now, paysim.Sign(secret, "msg_7", now, b)), b)
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
