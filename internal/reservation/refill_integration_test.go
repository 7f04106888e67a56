package reservation_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetCounter().GetValue()
}

// userIn is the first user id from start whose bucket of sku is b.
func userIn(sku lua.SKU, b int, start int64) int64 {
	for sku.For(start).Bucket != b {
		start++
	}
	return start
}

// A buyer whose bucket is empty while another bucket of the SKU still has
// units is admitted at once: the gateway moves stock on demand (refill.go).
// Then a burst of buyers spread over the four buckets buys exactly the
// stock, every bucket adds up, and SOLD_OUT is said only once no bucket has
// a unit.
func TestBucketsRefillOnDemandSellsEveryUnit(t *testing.T) {
	const stock = 12
	r := bucketRigWith(t, func(o *reservation.Options) { o.SoldOutMemo = 0 }, stock, 0, 0, 0)
	ctx := context.Background()
	sku := lua.SKU{ActivityID: r.k.ActivityID, SKUID: r.k.SKUID, Buckets: 4}
	admitted := 0
	for b := 1; b < 4; b++ {
		user := userIn(sku, b, int64(100*b))
		res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New())
		if err != nil || res.Code != reservation.Queued {
			t.Fatalf("user %d of empty bucket %d answered %+v, %v; want QUEUED while bucket 0 holds %d", user, b, res, err, stock)
		}
		admitted++
	}
	if moved := counterValue(t, r.m.Refills.WithLabelValues("moved")); moved < 3 {
		t.Fatalf("refills moved = %v, want one per empty bucket at least", moved)
	}

	var queued, soldOut atomic.Int64
	var mu sync.Mutex
	var toldSoldOut []int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for u := range 300 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			user := int64(10_000 + u)
			res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New())
			switch {
			case err != nil:
				t.Error(err)
			case res.Code == reservation.Queued:
				queued.Add(1)
			case res.Code == reservation.SoldOut:
				soldOut.Add(1)
				mu.Lock()
				toldSoldOut = append(toldSoldOut, user)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// A unit in flight at the very end of the burst can miss a buyer: those
	// told SOLD_OUT try once more, and the whole stock is sold.
	for _, user := range toldSoldOut {
		if res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New()); err == nil && res.Code == reservation.Queued {
			queued.Add(1)
		}
	}
	if got := admitted + int(queued.Load()); got != stock {
		t.Fatalf("%d admitted over the buckets, want the whole stock %d", got, stock)
	}
	st, err := lua.ReadSKUStock(ctx, r.rdb, r.k)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(true); err != nil || st.Available != 0 || st.OpenReserved != stock {
		t.Errorf("over the buckets: %v; available %d, open %d, want 0 and %d", err, st.Available, st.OpenReserved, stock)
	}
	// Every SOLD_OUT of the burst came when no bucket had a unit left, or
	// is counted as false.
	t.Logf("burst: %d queued, %d sold out, %v false sold out, %v units moved on demand", queued.Load(), soldOut.Load(),
		counterValue(t, r.m.FalseSoldOut), counterValue(t, r.m.RefillUnits))
	res, err := r.res.Reserve(ctx, userIn(sku, 2, 90_000), r.k.ActivityID, r.k.SKUID, uuid.New())
	if err != nil || res.Code != reservation.SoldOut {
		t.Fatalf("after the last unit: %+v, %v; want SOLD_OUT", res, err)
	}
	if v := counterValue(t, r.m.Refills.WithLabelValues("no_stock")); v < 1 {
		t.Errorf("refills no_stock = %v: the last SOLD_OUT did not look at the siblings", v)
	}
}

// A bucket without a counter (Redis lost it, or set-up left it for a rebuild)
// gets nothing on demand: no unit leaves a sibling for a bucket that cannot
// take it, and the buyer is told SOLD_OUT.
func TestBucketsRefillGivesNothingToABucketWithoutCounter(t *testing.T) {
	r := bucketRig(t, 5, 5)
	ctx := context.Background()
	sku := lua.SKU{ActivityID: r.k.ActivityID, SKUID: r.k.SKUID, Buckets: 2}
	r.rdb.Del(ctx, sku.Bucket(1).Counter())
	res, err := r.res.Reserve(ctx, userIn(sku, 1, 1), r.k.ActivityID, r.k.SKUID, uuid.New())
	if err != nil || res.Code != reservation.SoldOut {
		t.Fatalf("bucket without counter answered %+v, %v; want SOLD_OUT", res, err)
	}
	b0 := r.rdb.HMGet(ctx, sku.Bucket(0).Counter(), "available", "xfer_out").Val()
	if fmt.Sprint(b0) != "[5 0]" || r.rdb.ZCard(ctx, sku.Bucket(0).TransfersOut()).Val() != 0 {
		t.Fatalf("bucket 0 after the request: available/xfer_out %v, %d transfers out; want [5 0] and none", b0,
			r.rdb.ZCard(ctx, sku.Bucket(0).TransfersOut()).Val())
	}
	if r.rdb.Exists(ctx, sku.Bucket(1).Counter()).Val() != 0 {
		t.Fatal("the request created bucket 1's counter")
	}
}
