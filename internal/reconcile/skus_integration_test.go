package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

// threeSKUSale sets up a running sale of SKUs 1, 2 and 3 (10 units each),
// out of the shared active-SKU set (no scanner of the stack sends its
// reservations), and deletes its Redis keys when t ends.
func threeSKUSale(t *testing.T, r *rig) []lua.Keys {
	t.Helper()
	ctx := context.Background()
	a := sale.Activity{ActivityID: testenv.ActivityID(), Name: "test", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, MaxPerUser: 3} // one user orders every SKU (docs/spec.md#user-cap)
	var ks []lua.Keys
	for s := int64(1); s <= 3; s++ {
		a.SKUs = append(a.SKUs, sale.SKU{SKUID: s, Stock: 10, PriceCents: 100})
		ks = append(ks, lua.Keys{ActivityID: a.ActivityID, SKUID: s})
	}
	t.Cleanup(func() { testenv.DeleteActivity(r.rdb, a.ActivityID) })
	if _, err := sale.Setup(ctx, r.pool, r.rdb, a); err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		r.rdb.SRem(ctx, lua.ActiveSKUs, k.Member())
	}
	return ks
}

// createdOrder admits user on k and creates the order in PostgreSQL, leaving
// its Redis projection undone (as a crash between the two would).
func createdOrder(t *testing.T, r *rig, k lua.Keys, user int64) (reservationID, orderID uuid.UUID) {
	t.Helper()
	m := testenv.MustReserve(t, r.rdb, r.ids, k, user)
	res, err := r.acts.CreateOrder(context.Background(), m)
	if err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatalf("create order on %s: %+v, %v", k.Member(), res, err)
	}
	return m.ReservationID, res.OrderID
}

// One SKU whose Redis counter answers WRONGTYPE (as a SKU on a Redis shard
// that is down answers with an error) does not stop reconciliation: every
// other SKU of the same sale and of another sale is reconciled (each's
// lagging Redis projection repaired), every PostgreSQL backstop runs (an
// outbox row under an expired lease, a lost saga, a refund owed), the failing
// SKU is counted per SKU and reported, and the run's error names it. The
// Reconcile activity completes with the SKU in its summary.
func TestOneFailingSKUDoesNotStopReconciliation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	m := metrics.NewReconcile(prometheus.NewRegistry())
	rec, err := reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, nil), m, quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	saleA, saleB := threeSKUSale(t, r), threeSKUSale(t, r)
	bad := saleA[0] // the first SKU of its sale
	good := append(append([]lua.Keys{r.k}, saleA[1:]...), saleB...)
	badRID, _ := createdOrder(t, r, bad, 1)
	behind := map[lua.Keys]uuid.UUID{}
	for _, k := range good {
		behind[k], _ = createdOrder(t, r, k, 1)
	}
	// The failing SKU's counter becomes a string: reading it answers WRONGTYPE.
	r.rdb.Del(ctx, bad.Counter())
	if err := r.rdb.Set(ctx, bad.Counter(), "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL-only work for the backstops: an outbox row under an expired
	// lease, an order past its payment deadline whose saga is gone (no
	// Temporal here: reported), a payment on a cancelled order without its refund.
	stale := uuid.New()
	r.exec(t, `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload, status, lease_owner, lease_until)
		VALUES ($1, 'ORDER', $1, 'ORDER_CREATED', 1, 'k', '{}', 'SENDING', 'dead-relay', now() - interval '10 minutes')`, stale)
	lostRID, lostOrder := createdOrder(t, r, saleB[0], 2)
	r.exec(t, `UPDATE orders SET expires_at = now() - interval '1 hour' WHERE order_id = $1`, lostOrder)
	_, cancelled := createdOrder(t, r, saleB[1], 3)
	r.exec(t, `UPDATE orders SET status = 'CANCELLED' WHERE order_id = $1`, cancelled)
	if _, err := activities.PaymentStore(r.acts).Record(ctx, steps.Evidence{OrderID: cancelled, Provider: payments.ProviderName,
		TransactionID: "txn-" + uuid.NewString(), AmountCents: 100, PaidAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r.exec(t, `DELETE FROM refund_task`)
	// Everything older than the (1 ms) watermark.
	r.exec(t, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute'`)
	r.exec(t, `UPDATE payment_record SET updated_at = now() - interval '1 minute'`)

	rep, err := rec.Run(ctx, 0)
	var rerr *skuloop.Error
	if !errors.As(err, &rerr) || !skuloop.Only(err) || len(rerr.Failures) != 1 || rerr.Failures[0].ActivityID != bad.ActivityID ||
		rerr.Failures[0].SKUID != bad.SKUID || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("run error = %v, want one SKU failure of %s (WRONGTYPE)", err, bad.Member())
	}
	if rep.SKUs != 7 {
		t.Errorf("report says %d SKUs, want 7", rep.SKUs)
	}
	found := map[string]string{}
	for _, a := range rep.Anomalies {
		found[a.Type+" "+a.Object] = a.Action
	}
	// Every other SKU reconciled: its projection rebuilt in Redis.
	for _, k := range good {
		rid := behind[k].String()
		if act := found[reconcile.ProjectionBehind+" reservation:"+rid]; act != reconcile.ActionRepaired {
			t.Errorf("%s: projection of %s %q, want %s", k.Member(), rid, act, reconcile.ActionRepaired)
		}
		if st := r.rdb.HGet(ctx, k.Reservation(rid), "status").Val(); st != "ORDER_CREATED" {
			t.Errorf("%s: reservation %s is %s in Redis, want ORDER_CREATED", k.Member(), rid, st)
		}
	}
	if st := r.rdb.HGet(ctx, bad.Reservation(badRID.String()), "status").Val(); st != "RESERVED" {
		t.Errorf("the failing SKU's reservation is %s in Redis, want it untouched (RESERVED)", st)
	}
	badObj := fmt.Sprintf("sku:%d:%d", bad.ActivityID, bad.SKUID)
	if act := found[reconcile.SKUNotReconciled+" "+badObj]; act != reconcile.ActionCheckFailed {
		t.Errorf("report entry of %s: %q, want %s %s (report %+v)", badObj, act, reconcile.SKUNotReconciled, reconcile.ActionCheckFailed, rep.Anomalies)
	}
	// The PostgreSQL backstops ran.
	var outbox string
	var lostRepairs, refunds int
	for q, args := range map[string][]any{
		`SELECT status FROM event_outbox WHERE event_id = $1`:                                               {stale, &outbox},
		`SELECT count(*) FROM repair_task WHERE rule_name = 'RECONCILE:LOST_SAGA' AND object_id = $1::text`: {lostRID, &lostRepairs},
		`SELECT count(*) FROM refund_task WHERE order_id = $1 AND status = 'PENDING'`:                       {cancelled, &refunds},
	} {
		if err := r.pool.QueryRow(ctx, q, args[0]).Scan(args[1]); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if outbox != "RETRY" || lostRepairs != 1 || refunds != 1 {
		t.Errorf("backstops: outbox row %s (want RETRY), LOST_SAGA repairs %d, refund tasks %d (want 1 each)", outbox, lostRepairs, refunds)
	}
	if got := testutil.ToFloat64(m.SKUFailures.Counter(bad.ActivityID, bad.SKUID)); got != 1 {
		t.Errorf("failures counted for %s: %v, want 1", bad.Member(), got)
	}
	if got := testutil.ToFloat64(m.SKUFailures.Counter(r.k.ActivityID, r.k.SKUID)); got != 0 {
		t.Errorf("failures counted for the good %s: %v, want 0", r.k.Member(), got)
	}
	stored, lerr := reconcile.Load(ctx, r.pool, rep.ReportID)
	if lerr != nil || !slices.ContainsFunc(stored.Anomalies, func(a reconcile.Anomaly) bool {
		return a.Type == reconcile.SKUNotReconciled && a.Object == badObj
	}) {
		t.Errorf("stored report %+v, %v: no %s entry for %s", stored.Anomalies, lerr, reconcile.SKUNotReconciled, badObj)
	}

	// The activity of ReconcileWorkflow completes, naming the SKU.
	act, err := activities.NewReconciliation(rec)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := act.Reconcile(ctx, steps.ReconcileInput{})
	if err != nil || !slices.Equal(sum.FailedSKUs, []string{badObj}) || sum.Counts[reconcile.ActionCheckFailed] != 1 {
		t.Errorf("Reconcile activity = %+v, %v; want success with FailedSKUs [%s]", sum, err, badObj)
	}
	if got := testutil.ToFloat64(m.SKUFailures.Counter(bad.ActivityID, bad.SKUID)); got != 2 {
		t.Errorf("failures counted for %s after two runs: %v, want 2", bad.Member(), got)
	}
}
