package explain_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/explain"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// One set of rules judges both: for each of reconciliation's
// per-reservation anomaly classes, a purchase crafted into it is found by
// `seckill explain` (not consistent, the same anomaly named) and by a
// reconciliation run (the same type, for the same reservation); a healthy
// purchase by neither. After the run, each purchase reconciliation
// repaired is consistent for explain too.
func TestExplainAndReconciliationJudgeAlike(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	const wm = time.Millisecond
	r.ex.SetWatermark(wm)
	rec, err := reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, nil), metrics.NewReconcile(prometheus.NewRegistry()), quiet, wm)
	if err != nil {
		t.Fatal(err)
	}
	pay := payments.NewStore(r.pool, nil)
	past := func() (time.Time, time.Time) {
		return time.Now().Add(-2 * time.Minute).UTC(), time.Now().Add(-time.Minute).UTC()
	}
	pgCancel := func(oid uuid.UUID) {
		if _, err := pay.BeginCancel(ctx, oid, false); err != nil {
			t.Fatal(err)
		}
		if st, err := pay.FinalCancel(ctx, oid); err != nil || st != state.OrderCancelled {
			t.Fatalf("final cancel: %s %v", st, err)
		}
	}
	type purchase struct {
		name string
		rid  uuid.UUID
		want string // the anomaly, "" for none
	}
	var cases []purchase
	add := func(name string, rid uuid.UUID, want string) { cases = append(cases, purchase{name, rid, want}) }

	m, _ := r.order(t)
	add("paid, all in order", m.ReservationID, "")
	m, oid := r.order(t)
	r.paid(t, oid, "txn_hash_deleted")
	r.rdb.Del(ctx, r.k.Reservation(m.ReservationID.String()))
	add("paid, its Redis hash deleted", m.ReservationID, reconcile.ProjectionBehind)
	m = r.reserve(t)
	if res, err := r.acts.CreateOrder(ctx, m); err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatalf("create: %+v %v", res, err)
	}
	add("created, projection lost (Redis RESERVED)", m.ReservationID, reconcile.ProjectionBehind)
	m = r.reserve(t)
	m.ReservedAt, m.BusinessDeadline = past()
	if res, err := r.acts.CreateOrder(ctx, m); err != nil || res.Outcome != steps.OutcomeRejected {
		t.Fatalf("create past deadline: %+v %v", res, err)
	}
	add("rejected, never compensated", m.ReservationID, reconcile.CompensationStall)
	m, oid = r.order(t)
	pgCancel(oid)
	add("cancelled, Redis still ORDER_CREATED", m.ReservationID, reconcile.ReleaseMissing)
	m = r.reserve(t)
	res, err := r.acts.CreateOrder(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	pgCancel(res.OrderID)
	add("cancelled, projection lost (Redis RESERVED)", m.ReservationID, reconcile.ReleaseMissing)
	m, oid = r.order(t)
	r.paid(t, oid, "txn_compensated")
	r.rdb.HSet(ctx, r.k.Reservation(m.ReservationID.String()), "status", "COMPENSATED")
	add("paid, Redis COMPENSATED", m.ReservationID, reconcile.PaidButCompensated)
	m = r.reserve(t)
	m.ReservedAt, m.BusinessDeadline = past()
	if _, err := r.acts.CreateOrder(ctx, m); err != nil {
		t.Fatal(err)
	}
	if c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil || c.Status != state.ReservationCompensated {
		t.Fatalf("compensate: %+v %v", c, err)
	}
	r.rdb.HSet(ctx, r.k.Reservation(m.ReservationID.String()), "status", "ORDER_CREATED")
	add("compensated, Redis says otherwise", m.ReservationID, reconcile.CompensatedDiffers)
	m = r.reserve(t)
	if _, err := r.pool.Exec(ctx, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', now() - interval '10 minutes', now() - interval '5 minutes')`,
		m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID); err != nil {
		t.Fatal(err)
	}
	add("RESERVED in PostgreSQL past its deadline", m.ReservationID, reconcile.DeadlinePassed)
	m = r.reserve(t)
	r.rdb.HSet(ctx, r.k.Reservation(m.ReservationID.String()), "business_deadline_ms", time.Now().Add(-time.Minute).UnixMilli())
	add("only in Redis, past its deadline", m.ReservationID, reconcile.UnsentPastDeadline)
	m, oid = r.order(t)
	if _, err := r.pool.Exec(ctx, `UPDATE orders SET expires_at = now() - interval '1 minute' WHERE order_id = $1`, oid); err != nil {
		t.Fatal(err)
	}
	add("open order past its payment deadline, no saga", m.ReservationID, reconcile.LostSaga)
	// Everything older than the 1 ms watermark, as after a quiet while.
	if _, err := r.pool.Exec(ctx, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute' WHERE activity_id = $1`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}

	for _, c := range cases {
		rep := r.explain(t, c.rid)
		if got := anomalies(rep); c.want == "" && !rep.Verdict.Consistent || c.want != "" && (rep.Verdict.Consistent || !got[c.want]) {
			t.Errorf("%s: explain verdict %+v, want %s", c.name, rep.Verdict, nonEmpty(c.want, "consistent"))
		}
	}
	run, err := rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]map[string]string{} // object → type → action
	for _, a := range run.Anomalies {
		if found[a.Object] == nil {
			found[a.Object] = map[string]string{}
		}
		found[a.Object][a.Type] = a.Action
	}
	for _, c := range cases {
		got := found["reservation:"+c.rid.String()]
		if c.want == "" && len(got) != 0 || c.want != "" && got[c.want] == "" {
			t.Errorf("%s: reconciliation found %v, want %s", c.name, got, nonEmpty(c.want, "nothing"))
		}
		if got[c.want] != reconcile.ActionRepaired {
			continue
		}
		if rep := r.explain(t, c.rid); !rep.Verdict.Consistent {
			t.Errorf("%s: repaired by reconciliation (%s), explain still says %+v", c.name, c.want, rep.Verdict)
		}
	}
}

func anomalies(rep explain.Report) map[string]bool {
	out := map[string]bool{}
	for _, p := range rep.Verdict.Problems {
		if p.Anomaly != "" {
			out[p.Anomaly] = true
		}
	}
	return out
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
