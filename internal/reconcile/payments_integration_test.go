package reconcile_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// Callbacks give up after a while and nothing else asked the provider:
// reconciliation asks about every transaction this system started for an
// unpaid order. A buyer who paid gets the order PAID (callbacks lost); a
// cancelled order's transaction that is still open is closed; a payment on a
// cancelled order without its refund obligation gets it, due now.
func TestReconcileAsksTheProviderAndOwesRefunds(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	client, acts := paysimActivities(t, r)
	rec, err := reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, payments.PaysimProvider{Client: client}), metrics.NewReconcile(prometheus.NewRegistry()), quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	store := activities.PaymentStore(acts)
	order := func(user int64) uuid.UUID {
		m := r.reserve(t, user)
		res, err := acts.CreateOrder(ctx, m)
		if err != nil || res.Outcome != steps.OutcomeCreated {
			t.Fatal(res, err)
		}
		return res.OrderID
	}
	start := func(oid uuid.UUID) string { // what StartPayment does, with a dead callback URL
		if _, ok, err := store.BeginPayment(ctx, oid); !ok || err != nil {
			t.Fatalf("begin payment: %v %v", ok, err)
		}
		p, err := client.Create(ctx, oid, 100, "CNY", "http://127.0.0.1:1/callbacks-are-lost")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := store.OpenPayment(ctx, oid, payments.ProviderName, p.TransactionID); !ok || err != nil {
			t.Fatalf("open payment: %v %v", ok, err)
		}
		return p.TransactionID
	}
	paid := order(1)
	if _, err := client.Pay(ctx, start(paid), paysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	open := order(2)
	openTxn := start(open)
	r.exec(t, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, open) // its saga cancelled it, the close was lost
	waiting := order(3)
	start(waiting)
	// A payment on a cancelled order recorded before refund obligations existed.
	late := order(4)
	r.exec(t, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, late)
	lp, err := client.Create(ctx, late, 100, "CNY", "http://127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	lpPaid, err := client.Pay(ctx, lp.TransactionID, paysim.PayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Record(ctx, steps.Evidence{OrderID: late, Provider: payments.ProviderName, TransactionID: lp.TransactionID,
		AmountCents: 100, PaidAt: *lpPaid.PaidAt}); err != nil {
		t.Fatal(err)
	}
	r.exec(t, `DELETE FROM refund_task`)
	r.exec(t, `UPDATE payment_intent SET updated_at = now() - interval '1 minute'`)
	r.exec(t, `UPDATE payment_record SET updated_at = now() - interval '1 minute'`)
	time.Sleep(5 * time.Millisecond) // step past the 1 ms watermark

	rep, err := rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]reconcile.Anomaly{}
	for _, a := range rep.Anomalies {
		found[a.Type+" "+a.Object] = a
	}
	for _, key := range []string{reconcile.ProviderUnsettled + " order:" + paid.String(), reconcile.ProviderUnsettled + " order:" + open.String()} {
		if a, ok := found[key]; !ok || a.Action != reconcile.ActionRepaired {
			t.Errorf("%s: %+v (report %+v)", key, a, rep.Anomalies)
		}
	}
	if _, ok := found[reconcile.ProviderUnsettled+" order:"+waiting.String()]; ok {
		t.Errorf("an order still waiting for its payment was reported as an anomaly")
	}
	var refundOwed bool
	for _, a := range rep.Anomalies {
		refundOwed = refundOwed || (a.Type == reconcile.RefundOwed && a.Action == reconcile.ActionRepaired)
	}
	if !refundOwed {
		t.Errorf("the unrefunded payment on a cancelled order was not found: %+v", rep.Anomalies)
	}
	if st, _ := store.Status(ctx, paid); st != state.OrderPaid {
		t.Errorf("order paid at the provider is %s, want PAID", st)
	}
	if p, err := client.Get(ctx, openTxn); err != nil || p.Status != paysim.StatusClosed {
		t.Errorf("open transaction of a cancelled order at the provider: %+v %v, want CLOSED", p, err)
	}
	var tasks int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM refund_task WHERE order_id = $1 AND status = 'PENDING'`, late).Scan(&tasks)
	if tasks != 1 {
		t.Errorf("refund tasks of the late payment = %d, want 1", tasks)
	}
	var intents map[string]string = map[string]string{}
	rows, _ := r.pool.Query(ctx, `SELECT order_id::text, status FROM payment_intent`)
	for rows.Next() {
		var o, s string
		rows.Scan(&o, &s)
		intents[o] = s
	}
	rows.Close()
	if intents[paid.String()] != "PAID" || intents[open.String()] != "CLOSED" || intents[waiting.String()] != "OPEN" {
		t.Errorf("intents after reconciliation: %v", intents)
	}
}

// paysimActivities starts a payment provider simulator (callbacks tried once)
// for the test and returns its client and activities that use it.
func paysimActivities(t *testing.T, r *rig) (*paysim.Client, *activities.Activities) {
	t.Helper()
	sim, err := paysim.New(paysim.Options{Secret: []byte("0123456789abcdef0123456789abcdef"), MerchantKey: "k", Logger: quiet,
		MaxCallbackAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); sim.Close() })
	client := &paysim.Client{BaseURL: srv.URL, MerchantKey: "k"}
	cfg := testenv.Require(t)
	acts, err := activities.New(activities.Deps{Pool: r.pool, Verify: r.pool, Redis: r.rdb, Log: quiet, Topic: cfg.TopicOrderCreate,
		TerminalTTL: time.Hour, Provider: payments.PaysimProvider{Client: client}})
	if err != nil {
		t.Fatal(err)
	}
	return client, acts
}
