package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

// On a SKU of four buckets, reconciliation repairs each reservation in its
// own user's bucket: a projection that never happened, and a reservation
// stuck past its deadline whose unit goes back to the bucket it came from.
// No other bucket moves, and every invariant holds afterwards.
func TestReconcileRepairsInTheReservationsBucket(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sku := testenv.BucketedSale(t, r.pool, r.rdb, 9, 8, 100, 4)
	userIn := func(b int, from int64) int64 {
		for u := from; ; u++ {
			if sku.For(u).Bucket == b {
				return u
			}
		}
	}
	behindUser, stuckUser := userIn(1, 1), userIn(3, 1)
	behind := testenv.MustReserve(t, r.rdb, r.ids, sku.For(behindUser), behindUser)
	if res, err := r.acts.CreateOrder(ctx, behind); err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatal(res, err)
	}
	stuck := testenv.MustReserve(t, r.rdb, r.ids, sku.For(stuckUser), stuckUser)
	r.exec(t, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', now() - interval '10 minutes', now() - interval '5 minutes')`,
		stuck.ReservationID, stuck.RequestID, stuck.ActivityID, stuck.SKUID, stuck.UserID, stuck.MessageID)
	r.exec(t, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute'`)
	before, err := lua.ReadBuckets(ctx, r.rdb, sku.Bucket(0), 4)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, nil), metrics.NewReconcile(prometheus.NewRegistry()), quiet, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the watermark is wall-clock based: step past it
	rep, err := rec.Run(ctx, sku.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	got := byType(rep)
	if got[reconcile.ProjectionBehind].Action != reconcile.ActionRepaired || got[reconcile.DeadlinePassed].Action != reconcile.ActionRepaired {
		t.Fatalf("anomalies %+v, want the projection and the overdue reservation repaired", rep.Anomalies)
	}
	if st := r.rdb.HGet(ctx, sku.For(behindUser).Reservation(behind.ReservationID.String()), "status").Val(); st != "ORDER_CREATED" {
		t.Errorf("projection in bucket 1: %q, want ORDER_CREATED", st)
	}
	after, err := lua.ReadBuckets(ctx, r.rdb, sku.Bucket(0), 4)
	if err != nil {
		t.Fatal(err)
	}
	for b := range after {
		d, a := before[b], after[b]
		switch b {
		case 1: // the projection: open_reserved → committed
			if a.OpenReserved != d.OpenReserved-1 || a.Committed != d.Committed+1 || a.Available != d.Available {
				t.Errorf("bucket 1 %+v → %+v, want one unit open → committed", d, a)
			}
		case 3: // the compensation: open_reserved → available
			if a.OpenReserved != d.OpenReserved-1 || a.Available != d.Available+1 || a.Compensated != d.Compensated+1 {
				t.Errorf("bucket 3 %+v → %+v, want one unit given back", d, a)
			}
		default:
			if a != d {
				t.Errorf("bucket %d moved: %+v → %+v", b, d, a)
			}
		}
	}
	if _, v, err := invariants.Check(ctx, r.pool, r.rdb, sku.ActivityID, sku.SKUID, false); err != nil || len(v) > 0 {
		t.Fatalf("after the repairs: %v %v", v, err)
	}
}
