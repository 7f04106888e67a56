package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type rig struct {
	pool *pgxpool.Pool
	rdb  redis.UniversalClient
	acts *activities.Activities
	rec  *reconcile.Reconciler
	k    lua.Keys
	ids  *ids.Deriver
}

func newRig(t *testing.T) *rig {
	t.Helper()
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.Sale(t, pool, rdb, 5, 10, 100)
	verify, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verify.Close)
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: verify, Redis: rdb, Log: quiet, Topic: "t", TerminalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A zero watermark: everything counts as settled for the test.
	rec, err := reconcile.New(pool, rdb, testenv.Stores(t, pool, rdb, nil), metrics.NewReconcile(prometheus.NewRegistry()), quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := cfg.IDKeys()
	d, _ := ids.NewDeriver(keys, cfg.IDKeyVersion)
	return &rig{pool: pool, rdb: rdb, acts: acts, rec: rec, k: k, ids: d}
}

func (r *rig) reserve(t *testing.T, user int64) events.OrderCreateRequested {
	t.Helper()
	return testenv.MustReserve(t, r.rdb, r.ids, r.k, user)
}

func (r *rig) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func byType(rep reconcile.Report) map[string]reconcile.Anomaly {
	out := map[string]reconcile.Anomaly{}
	for _, a := range rep.Anomalies {
		out[a.Type] = a
	}
	return out
}

// Crafted drift, one of each kind: the right classification and repair or
// MANUAL for each; a second run creates no new repair.
func TestReconcileCraftedDrift(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	// 1. A created order whose Redis projection never happened (RESERVED in Redis).
	behind := r.reserve(t, 1)
	if res, err := r.acts.CreateOrder(ctx, behind); err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatal(res, err)
	}
	// 2. A reservation stuck RESERVED in PostgreSQL past its business deadline
	//    (its message never reached CreateOrder).
	stuck := r.reserve(t, 2)
	r.exec(t, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', now() - interval '10 minutes', now() - interval '5 minutes')`,
		stuck.ReservationID, stuck.RequestID, stuck.ActivityID, stuck.SKUID, stuck.UserID, stuck.MessageID)
	// 3. PAID in PostgreSQL but COMPENSATED in Redis.
	paid := r.reserve(t, 3)
	res, err := r.acts.CreateOrder(ctx, paid)
	if err != nil {
		t.Fatal(err)
	}
	r.acts.ProjectOrderCreated(ctx, steps.ProjectionInput{ReservationID: paid.ReservationID, OrderID: res.OrderID, ActivityID: paid.ActivityID, SKUID: paid.SKUID})
	r.exec(t, `UPDATE orders SET status = 'PAID', paid_at = now(), payment_id = gen_random_uuid() WHERE order_id = $1`, res.OrderID)
	r.exec(t, `UPDATE sku_inventory SET occupied_stock = occupied_stock - 1, sold_stock = sold_stock + 1 WHERE activity_id = $1`, r.k.ActivityID)
	r.rdb.HSet(ctx, r.k.Reservation(paid.ReservationID.String()), "status", "COMPENSATED")
	// 4. An outbox row stuck SENDING under an expired lease.
	stale := uuid.New()
	r.exec(t, `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload, status, lease_owner, lease_until)
		VALUES ($1, 'ORDER', $1, 'ORDER_CREATED', 1, 'k', '{}', 'SENDING', 'dead-relay', now() - interval '10 minutes')`, stale)
	// 5. A Redis counter off by one.
	r.rdb.HIncrBy(ctx, r.k.Counter(), "available", 1)
	// Let everything be older than the (1 ms) watermark.
	r.exec(t, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute'`)
	time.Sleep(5 * time.Millisecond) // the watermark is wall-clock based: step past it

	rep, err := r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	got := byType(rep)
	want := map[string]string{
		reconcile.ProjectionBehind:   reconcile.ActionRepaired,
		reconcile.DeadlinePassed:     reconcile.ActionRepaired,
		reconcile.PaidButCompensated: reconcile.ActionManual,
		reconcile.OutboxLeaseExpired: reconcile.ActionRepaired,
		reconcile.RedisInvariant:     reconcile.ActionManual,
	}
	for typ, action := range want {
		a, ok := got[typ]
		if !ok {
			t.Errorf("%s not detected (report: %+v)", typ, rep.Anomalies)
			continue
		}
		if a.Action != action {
			t.Errorf("%s: action %s (%s), want %s", typ, a.Action, a.Detail, action)
		}
	}
	if len(rep.Anomalies) != len(want) {
		t.Errorf("%d anomalies, want %d: %+v", len(rep.Anomalies), len(want), rep.Anomalies)
	}
	// The repairs took effect through the standard state machine.
	if st := r.rdb.HGet(ctx, r.k.Reservation(behind.ReservationID.String()), "status").Val(); st != "ORDER_CREATED" {
		t.Errorf("projection not rebuilt: %s", st)
	}
	var stuckStatus, outboxStatus string
	r.pool.QueryRow(ctx, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, stuck.ReservationID).Scan(&stuckStatus)
	r.pool.QueryRow(ctx, `SELECT status FROM event_outbox WHERE event_id = $1`, stale).Scan(&outboxStatus)
	if stuckStatus != "COMPENSATED" || outboxStatus != "RETRY" {
		t.Errorf("stuck reservation %s (want COMPENSATED), outbox %s (want RETRY)", stuckStatus, outboxStatus)
	}
	var tasks int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM repair_task`).Scan(&tasks)
	if tasks != len(want) {
		t.Errorf("repair_task rows %d, want %d", tasks, len(want))
	}

	// A second run repairs nothing twice and records no new repair.
	time.Sleep(5 * time.Millisecond)
	rep2, err := r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep2.Anomalies {
		if a.Action == reconcile.ActionRepaired {
			t.Errorf("second run repaired %s %s again", a.Type, a.Object)
		}
	}
	var tasks2 int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM repair_task`).Scan(&tasks2)
	if tasks2 != tasks {
		t.Errorf("second run added %d repair rows", tasks2-tasks)
	}
	stored, err := reconcile.Load(ctx, r.pool, rep2.ReportID)
	if err != nil || stored.ReportID != rep2.ReportID || len(stored.Anomalies) != len(rep2.Anomalies) {
		t.Fatalf("stored report = %+v, %v", stored, err)
	}
	// What `seckill reconcile run --json` prints is the stored report: its figures too.
	if stored.SKUs != 1 || stored.Checked != rep2.Checked || stored.Checked < 3 {
		t.Fatalf("stored report says %d skus, %d reservations checked; the run checked %d skus, %d reservations",
			stored.SKUs, stored.Checked, rep2.SKUs, rep2.Checked)
	}
}
