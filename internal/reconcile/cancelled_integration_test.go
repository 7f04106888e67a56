package reconcile_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// cancelledWithoutProjection makes the purchase of issue 22 item 4: the order
// is created in PostgreSQL, order_created.lua's write is lost (Redis still
// says RESERVED, the reservation still in send_due), and the order is then
// cancelled in PostgreSQL (its unit released there).
func (r *rig) cancelledWithoutProjection(t *testing.T, user int64) (events.OrderCreateRequested, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m := r.reserve(t, user)
	res, err := r.acts.CreateOrder(ctx, m)
	if err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatalf("create order: %+v %v", res, err)
	}
	pay := payments.NewStore(r.pool, nil)
	if _, err := pay.BeginCancel(ctx, res.OrderID, false); err != nil {
		t.Fatal(err)
	}
	if st, err := pay.FinalCancel(ctx, res.OrderID); err != nil || st != state.OrderCancelled {
		t.Fatalf("final cancel: %s %v", st, err)
	}
	if st := r.rdb.HGet(ctx, r.k.Reservation(m.ReservationID.String()), "status").Val(); st != "RESERVED" {
		t.Fatalf("redis status %q, want RESERVED (projection lost)", st)
	}
	return m, res.OrderID
}

// wantUnitBack checks the reservation's unit is back in Redis stock, once:
// the counters are the sale's initial ones, the hash says CANCELLED with
// its release marker, and the reservation is out of send_due.
func (r *rig) wantUnitBack(t *testing.T, m events.OrderCreateRequested, oid uuid.UUID, initial map[string]string) {
	t.Helper()
	ctx := context.Background()
	rid := m.ReservationID.String()
	c := r.rdb.HGetAll(ctx, r.k.Counter()).Val()
	for _, f := range []string{"available", "open_reserved", "committed"} {
		if c[f] != initial[f] {
			t.Errorf("counter %s = %s, want %s (the unit back once)", f, c[f], initial[f])
		}
	}
	if st := r.rdb.HGet(ctx, r.k.Reservation(rid), "status").Val(); st != "CANCELLED" {
		t.Errorf("redis status %q, want CANCELLED", st)
	}
	if mk := r.rdb.Get(ctx, r.k.ReleaseMarker(rid)).Val(); mk != "RELEASE:"+oid.String() {
		t.Errorf("release marker %q", mk)
	}
	if _, err := r.rdb.ZScore(ctx, r.k.SendDue(), rid).Result(); err == nil {
		t.Errorf("reservation still in send_due: the scanner would re-send it forever")
	}
}

// The saga's release of such an order gives the unit back (project, then
// release), and again is harmless.
func TestReleaseOfACancelledOrderWhoseProjectionWasLost(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	initial := r.rdb.HGetAll(ctx, r.k.Counter()).Val()
	m, oid := r.cancelledWithoutProjection(t, 1)
	in := steps.ReleaseInput{ReservationID: m.ReservationID, OrderID: oid, ActivityID: m.ActivityID, SKUID: m.SKUID}
	p, err := r.acts.ReleaseRedis(ctx, in)
	if err != nil || p.Code != 1 {
		t.Fatalf("release: %+v %v, want code 1 RELEASED", p, err)
	}
	r.wantUnitBack(t, m, oid, initial)
	if p, err = r.acts.ReleaseRedis(ctx, in); err != nil || p.Code != 2 {
		t.Fatalf("release again: %+v %v, want code 2 ALREADY_RELEASED", p, err)
	}
	r.wantUnitBack(t, m, oid, initial)
}

// Reconciliation's CANCELLED branch gives the unit of such an order back
// (CANCELLED_BUT_REDIS_HELD), once.
func TestReconcileReleasesACancelledOrderStillReservedInRedis(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	initial := r.rdb.HGetAll(ctx, r.k.Counter()).Val()
	m, oid := r.cancelledWithoutProjection(t, 1)
	r.exec(t, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute'`)
	rep, err := r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := byType(rep)[reconcile.ReleaseMissing]
	if !ok || a.Action != reconcile.ActionRepaired || a.Object != "reservation:"+m.ReservationID.String() {
		t.Fatalf("want %s AUTO_REPAIRED for the reservation; report %+v", reconcile.ReleaseMissing, rep.Anomalies)
	}
	r.wantUnitBack(t, m, oid, initial)
	rep, err = r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep.Anomalies {
		if a.Action == reconcile.ActionRepaired {
			t.Errorf("second run repaired %s %s", a.Type, a.Object)
		}
	}
	r.wantUnitBack(t, m, oid, initial)
}
