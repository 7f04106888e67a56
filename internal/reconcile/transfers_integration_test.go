package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// markerTTL is the rebalancer's marker TTL in these tests: testenv.Stores'
// TerminalTTL, which the reconciler gives with.
const markerTTL = time.Hour

// xferRig is a sale of 12 units in 4 buckets and a reconciler with metrics
// of its own.
type xferRig struct {
	*rig
	sku lua.SKU
	rec *reconcile.Reconciler
	m   *metrics.Reconcile
}

func newXferRig(t *testing.T) *xferRig {
	t.Helper()
	r := newRig(t)
	x := &xferRig{rig: r, sku: testenv.BucketedSale(t, r.pool, r.rdb, 7, 12, 100, 4), m: metrics.NewReconcile(prometheus.NewRegistry())}
	var err error
	if x.rec, err = reconcile.New(r.pool, r.rdb, testenv.Stores(t, r.pool, r.rdb, nil), x.m, quiet, time.Minute); err != nil {
		t.Fatal(err)
	}
	return x
}

// move runs take, give and close of k units from bucket from to bucket to,
// as the rebalancer does, the take at takenMS.
func (x *xferRig) move(t *testing.T, id string, from, to int, k int64, takenMS int64) {
	t.Helper()
	ctx := context.Background()
	if r, err := lua.XferTake(ctx, x.rdb, x.sku.Bucket(from), lua.XferTakeArgs{TransferID: id, To: to, K: k, NowMS: takenMS}); err != nil || r.Code != lua.XferTaken {
		t.Fatalf("take = %+v, %v", r, err)
	}
	if r, err := lua.XferGive(ctx, x.rdb, x.sku.Bucket(to), lua.XferGiveArgs{TransferID: id, From: from, K: k, TTL: markerTTL}); err != nil || r.Code != lua.XferGiven {
		t.Fatalf("give = %+v, %v", r, err)
	}
	if r, err := lua.XferClose(ctx, x.rdb, x.sku.Bucket(from), lua.XferCloseArgs{TransferID: id, TTL: markerTTL}); err != nil || r.Code != lua.XferClosed {
		t.Fatalf("close = %+v, %v", r, err)
	}
}

// loseGive makes bucket to look as if its master lost the give of id (the
// last second of its writes): no marker, and the k units not in its
// available and xfer_in. The giving bucket's close stays committed.
func (x *xferRig) loseGive(t *testing.T, id string, to int, k int64) {
	t.Helper()
	ctx := context.Background()
	kb := x.sku.Bucket(to)
	if x.rdb.Del(ctx, kb.TransferIn(id)).Val() != 1 {
		t.Fatalf("no marker of %s in bucket %d", id, to)
	}
	x.rdb.HIncrBy(ctx, kb.Counter(), "available", -k)
	x.rdb.HIncrBy(ctx, kb.Counter(), "xfer_in", -k)
}

func (x *xferRig) stock(t *testing.T) lua.SKUStock {
	t.Helper()
	s, err := lua.ReadSKUStock(context.Background(), x.rdb, x.sku.Bucket(0))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (x *xferRig) run(t *testing.T) reconcile.Report {
	t.Helper()
	rep, err := x.rec.Run(context.Background(), x.sku.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// transferAnomalies are the report's anomalies of the two transfer types.
func transferAnomalies(rep reconcile.Report) []reconcile.Anomaly {
	var out []reconcile.Anomaly
	for _, a := range rep.Anomalies {
		if a.Type == reconcile.TransferGiveLost || a.Type == reconcile.TransferUnaccounted {
			out = append(out, a)
		}
	}
	return out
}

// A transfer of 3 units from bucket 0 to bucket 2 is closed, then bucket 2's
// master loses the give. The units are in transfer forever: nothing
// recovers a closed transfer, and the counters' conservation (with in
// transfer) holds. Reconciliation finds it, gives it again through
// xfer_give.lua with the transfer's id, and a second run changes nothing.
func TestReconcileGivesALostTransferGiveAgain(t *testing.T) {
	x := newXferRig(t)
	ctx := context.Background()
	x.move(t, "lost-1", 0, 2, 3, time.Now().UnixMilli())
	x.move(t, "kept-1", 1, 3, 1, time.Now().UnixMilli())
	x.loseGive(t, "lost-1", 2, 3)
	hidden := x.stock(t)
	if hidden.InFlight != 3 || hidden.Sent != 0 || len(hidden.Unmarked) != 1 || hidden.Check(false) != nil || hidden.Check(true) == nil {
		t.Fatalf("after the lost give: %+v (check %v)", hidden, hidden.Check(true))
	}

	rep := x.run(t)
	got := transferAnomalies(rep)
	if len(got) != 1 || got[0].Type != reconcile.TransferGiveLost || got[0].Action != reconcile.ActionRepaired || got[0].Object != "transfer:lost-1" {
		t.Fatalf("transfer anomalies %+v, want lost-1 repaired", got)
	}
	var status, target string
	if err := x.pool.QueryRow(ctx, `SELECT status, target_state FROM repair_task WHERE repair_id = $1`, got[0].RepairID).Scan(&status, &target); err != nil ||
		status != "APPLIED" || target != "GIVEN" {
		t.Fatalf("repair_task %s: %s %s %v", got[0].RepairID, status, target, err)
	}
	s := x.stock(t)
	if err := s.Check(true); err != nil || s.InFlight != 0 || len(s.Unmarked) != 0 {
		t.Fatalf("after reconciliation: %v %+v", err, s)
	}
	if b := s.Buckets[2]; b.Available != 6 || b.XferIn != 3 || s.Available != 12 {
		t.Fatalf("bucket 2 %+v, Σ available %d; want 6 available, xfer_in 3, 12 in all", b, s.Available)
	}
	if v := x.rdb.Get(ctx, x.sku.Bucket(2).TransferIn("lost-1")).Val(); v != "0:3" {
		t.Fatalf("marker %q", v)
	}
	if g := testutil.ToFloat64(x.m.TransferStale); g != 0 || rep.Summary[reconcile.SummaryTransferStale] != 0 {
		t.Fatalf("stale units %v / %v after the repair", g, rep.Summary)
	}
	// Again: nothing to do, nothing moves.
	if again := transferAnomalies(x.run(t)); len(again) != 0 {
		t.Fatalf("second run: %+v", again)
	}
	if after := x.stock(t); after.Buckets[2] != s.Buckets[2] || after.Available != 12 {
		t.Fatalf("second run moved stock: %+v → %+v", s.Buckets, after.Buckets)
	}
}

// What reconciliation cannot prove it reports and leaves, and the stale
// units show on the gauge the alert reads.
func TestReconcileReportsTransfersItCannotProve(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		make      func(t *testing.T, x *xferRig)
		object    string // of the MANUAL anomaly; "" for the SKU's
		wantStale int64
	}{
		{"a marker deleted, its units given", func(t *testing.T, x *xferRig) {
			x.move(t, "m1", 0, 2, 3, time.Now().UnixMilli())
			x.rdb.Del(ctx, x.sku.Bucket(2).TransferIn("m1"))
		}, "transfer:m1", 0},
		{"a lost give taken too long ago (its marker could have expired)", func(t *testing.T, x *xferRig) {
			x.move(t, "old1", 0, 2, 3, time.Now().Add(-markerTTL/2-time.Minute).UnixMilli())
			x.loseGive(t, "old1", 2, 3)
		}, "transfer:old1", 3},
		{"units missing with no record", func(t *testing.T, x *xferRig) {
			kb := x.sku.Bucket(1)
			x.rdb.HIncrBy(ctx, kb.Counter(), "available", -2)
			x.rdb.HIncrBy(ctx, kb.Counter(), "xfer_in", -2)
		}, "", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newXferRig(t)
			c.make(t, x)
			before := x.stock(t)
			rep := x.run(t)
			got := transferAnomalies(rep)
			want := c.object
			if want == "" {
				want = fmt.Sprintf("sku:%d:%d", x.sku.ActivityID, x.sku.SKUID)
			}
			if len(got) != 1 || got[0].Type != reconcile.TransferUnaccounted || got[0].Action != reconcile.ActionManual || got[0].Object != want {
				t.Fatalf("transfer anomalies %+v, want one MANUAL %s on %s", got, reconcile.TransferUnaccounted, want)
			}
			if after := x.stock(t); !sameBuckets(before, after) {
				t.Fatalf("stock moved: %+v → %+v", before.Buckets, after.Buckets)
			}
			if g := testutil.ToFloat64(x.m.TransferStale); g != float64(c.wantStale) ||
				int64(rep.Summary[reconcile.SummaryTransferStale]) != c.wantStale {
				t.Fatalf("stale units %v / %v, want %d", g, rep.Summary, c.wantStale)
			}
		})
	}
}

// A SENT transfer older than the watermark (the rebalancer not finishing
// it) is stale, not an anomaly: recovery gives it.
func TestReconcileCountsAnOldSentTransferStale(t *testing.T) {
	x := newXferRig(t)
	if r, err := lua.XferTake(context.Background(), x.rdb, x.sku.Bucket(0),
		lua.XferTakeArgs{TransferID: "s1", To: 1, K: 2, NowMS: time.Now().Add(-time.Hour).UnixMilli()}); err != nil || r.Code != lua.XferTaken {
		t.Fatalf("take = %+v, %v", r, err)
	}
	rep := x.run(t)
	if got := transferAnomalies(rep); len(got) != 0 {
		t.Fatalf("transfer anomalies %+v", got)
	}
	if g := testutil.ToFloat64(x.m.TransferStale); g != 2 {
		t.Fatalf("stale units %v, want 2", g)
	}
}

func sameBuckets(a, b lua.SKUStock) bool {
	if len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Buckets {
		if a.Buckets[i] != b.Buckets[i] {
			return false
		}
	}
	return true
}
