package rebalancer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/lua"
)

// addSKU writes SKU skuID of f's sale as testenv.BucketSale writes its first
// (len(stock) buckets, bucket b with stock[b] available) and adds its
// buckets to f's active set; the sale's keys are deleted when the test ends.
func (f *fixture) addSKU(skuID int64, stock ...int64) lua.Keys {
	f.t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: f.k.ActivityID, SKUID: skuID}
	for b, n := range stock {
		kb := k.InBucket(b)
		meta := []any{"start_ms", 0, "end_ms", int64(1) << 50, "order_deadline_ms", 300000, "payment_timeout_ms", 60000}
		if b == 0 {
			meta = append(meta, lua.MetaBuckets, len(stock))
		}
		if err := f.rdb.HSet(ctx, kb.Counter(), "initial", n, "available", n, "open_reserved", 0, "committed", 0,
			"xfer_in", 0, "xfer_out", 0, "sold_out_hits", 0).Err(); err != nil {
			f.t.Fatal(err)
		}
		if err := f.rdb.HSet(ctx, kb.Meta(), meta...).Err(); err != nil {
			f.t.Fatal(err)
		}
		f.rdb.SAdd(ctx, f.set, kb.Member())
	}
	return k
}

// One SKU whose bucket counter answers WRONGTYPE (as a SKU on a Redis shard
// that is down answers with an error) does not stall the tick: the other
// SKUs of the same sale and of another sale are rebalanced in the same
// tick, the failing SKU is counted per SKU and named in the tick's error.
func TestOneFailingSKUDoesNotStallTheTick(t *testing.T) {
	f := newFixture(t, 40, 0) // SKU 1 of sale A, a good one
	other := newFixture(t, 40, 0)
	ctx := context.Background()
	bad := f.addSKU(2, 40, 0)
	good := []lua.Keys{f.k, f.addSKU(3, 40, 0), f.addSKU(4, 40, 0), other.k, other.addSKU(2, 40, 0)}
	for _, k := range []lua.Keys{other.k, good[4]} { // sale B's SKUs into f's set as well
		for b := range 2 {
			f.rdb.SAdd(ctx, f.set, k.InBucket(b).Member())
		}
	}
	// Bucket 1's counter of the failing SKU becomes a string: reading it answers WRONGTYPE.
	if err := f.rdb.Del(ctx, bad.InBucket(1).Counter()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.Set(ctx, bad.InBucket(1).Counter(), "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r := f.rebalancer(nil, Options{})
	st, err := r.TickOnce(ctx)
	if st.SKUs != len(good)+1 || st.Moves != len(good) {
		t.Errorf("tick = %+v, want %d SKUs seen and one move for each of the %d good ones; error %v", st, len(good)+1, len(good), err)
	}
	for _, k := range good {
		s, rerr := lua.ReadSKUStock(ctx, f.rdb, k)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if cerr := s.Check(true); cerr != nil {
			t.Fatalf("%s: conservation: %v", k.Member(), cerr)
		}
		if got := fmt.Sprint(s.Buckets[0].Available, s.Buckets[1].Available); got != "20 20" {
			t.Errorf("%s: buckets' available after the tick %s, want 20 20", k.Member(), got)
		}
	}
	var terr *skuloop.Error
	if !errors.As(err, &terr) || !skuloop.Only(err) || len(terr.Failures) != 1 ||
		terr.Failures[0].ActivityID != bad.ActivityID || terr.Failures[0].SKUID != bad.SKUID ||
		!strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("tick error = %v, want one SKU failure of %s (WRONGTYPE)", err, bad.Member())
	}
	if got := testutil.ToFloat64(r.m.SKUFailures.Counter(bad.ActivityID, bad.SKUID)); got != 1 {
		t.Errorf("failures counted for %s: %v, want 1", bad.Member(), got)
	}
	if got := testutil.ToFloat64(r.m.SKUFailures.Counter(f.k.ActivityID, f.k.SKUID)); got != 0 {
		t.Errorf("failures counted for the good %s: %v, want 0", f.k.Member(), got)
	}
	// The failing SKU's buckets were left as they were.
	if got := f.rdb.HGet(ctx, bad.Counter(), "available").Val(); got != "40" {
		t.Errorf("the failing SKU's bucket 0 has %s available, want 40 (untouched)", got)
	}
}
