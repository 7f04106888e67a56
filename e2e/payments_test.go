package e2e

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/tools/flashsale"
)

// startPaysim runs the provider simulator in-process for one test.
func startPaysim(t *testing.T, secret []byte, merchantKey string) string {
	t.Helper()
	sim, err := paysim.New(paysim.Options{Secret: secret, MerchantKey: merchantKey, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	return srv.URL
}

// Orders whose buyers pay early, pay right at the payment deadline (racing
// the cancel, with delayed, duplicated and reordered callbacks), pay after
// the cancel, or never pay. No PAID order is cancelled, every late payment
// ends REFUNDED, stock is released exactly once per cancelled order in
// PostgreSQL and Redis, and stock is conserved (the invariant check of
// flashsale.Run covers I1-I7 with these payment facts).
func TestPaymentVersusCancelRace(t *testing.T) {
	cfg := e2eConfig(t)
	cfg.PaysimURL = startPaysim(t, cfg.PaysimSecretBytes(), cfg.PaysimMerchantKey)
	const orders = 1000
	warnings := newCountingHandler(logger().Handler(), "unhandled signals")
	rep := runWith(t, cfg, slog.New(warnings), flashsale.Options{Stock: orders, Buyers: orders, Concurrency: 64, PaymentTimeout: 20 * time.Second,
		Timeout: 5 * time.Minute})
	// Duplicated, reordered callbacks and repairs after the end never leave a
	// saga with signals it did not handle (the SDK warns of each).
	if n := warnings.count.Load(); n != 0 {
		t.Errorf("%d sagas completed with unhandled signals", n)
	}
	s := rep.Snapshot
	if rep.Orders != orders {
		t.Fatalf("orders %d, want %d", rep.Orders, orders)
	}
	if s.Paid+s.Cancelled+s.Refunded != orders || s.OpenOrders != 0 || s.Refunding != 0 {
		t.Fatalf("orders not all final: paid %d cancelled %d refunded %d open %d refunding %d", s.Paid, s.Cancelled, s.Refunded, s.OpenOrders, s.Refunding)
	}
	plan := rep.Plan
	if s.Paid < int64(plan[flashsale.PayEarly]) {
		t.Fatalf("%d paid, but %d buyers paid early", s.Paid, plan[flashsale.PayEarly])
	}
	if s.Refunded != int64(plan[flashsale.PayLate]) {
		t.Fatalf("%d refunded, want every late payer (%d)", s.Refunded, plan[flashsale.PayLate])
	}
	if s.Cancelled < int64(plan[flashsale.NeverPay]) {
		t.Fatalf("%d cancelled, but %d buyers never paid", s.Cancelled, plan[flashsale.NeverPay])
	}
	if s.PGSold != s.Paid || s.RedisCommitted != s.Paid || s.PGAvailable != orders-s.Paid || s.RedisAvailable != orders-s.Paid {
		t.Fatalf("stock does not match the outcome: %+v", s)
	}
	t.Logf("plan %v → paid %d, cancelled %d, refunded %d", plan, s.Paid, s.Cancelled, s.Refunded)
}

// countingHandler counts the log records whose message contains match
// (derived handlers share the count).
type countingHandler struct {
	slog.Handler
	match string
	count *atomic.Int64
}

func newCountingHandler(h slog.Handler, match string) *countingHandler {
	return &countingHandler{Handler: h, match: match, count: &atomic.Int64{}}
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.count.Add(1)
	}
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(a), match: h.match, count: h.count}
}

func (h *countingHandler) WithGroup(g string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(g), match: h.match, count: h.count}
}
