package rebalancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// fixture is one fake bucketed sale with an active-SKU set and a lease key
// of its own, so no other rebalancer on the shared Redis sees it.
type fixture struct {
	t        *testing.T
	rdb      redis.UniversalClient
	k        lua.Keys
	n        int
	set      string
	leaseKey string
}

func newFixture(t *testing.T, stock ...int64) *fixture {
	t.Helper()
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	k := testenv.BucketSale(t, rdb, stock...)
	f := &fixture{t: t, rdb: rdb, k: k, n: len(stock),
		set:      fmt.Sprintf("seckill:test:active:%d", k.ActivityID),
		leaseKey: fmt.Sprintf("seckill:test:rebalance_lease:%d", k.ActivityID)}
	for b := range stock {
		rdb.SAdd(context.Background(), f.set, k.InBucket(b).Member())
	}
	t.Cleanup(func() { rdb.Del(context.Background(), f.set, f.leaseKey) })
	return f
}

// rebalancer is a fresh instance (as after a process restart).
func (f *fixture) rebalancer(fp *failpoint.Set, opt Options) *Rebalancer {
	f.t.Helper()
	opt.ActiveSKUs, opt.LeaseKey, opt.TTL = f.set, f.leaseKey, time.Hour
	r, err := New(f.rdb, opt, metrics.NewRebalance(prometheus.NewRegistry()), fp,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// later is a rebalancer whose clock runs a minute ahead, so every SENT
// transfer is past its grace.
func (f *fixture) later() *Rebalancer {
	r := f.rebalancer(nil, Options{})
	r.now = func() time.Time { return time.Now().Add(time.Minute) }
	return r
}

// stock reads the SKU and fails the test unless it is conserved (with
// records matching the counters when quiescent).
func (f *fixture) stock(quiescent bool) lua.SKUStock {
	f.t.Helper()
	s, err := lua.ReadSKUStock(context.Background(), f.rdb, f.k)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s.Check(quiescent); err != nil {
		f.t.Fatalf("conservation: %v", err)
	}
	return s
}

func (f *fixture) available() []int64 {
	f.t.Helper()
	s := f.stock(true)
	out := make([]int64, len(s.Buckets))
	for b, bs := range s.Buckets {
		out[b] = bs.Available
	}
	return out
}

func (f *fixture) hit(b int) {
	f.rdb.HIncrBy(context.Background(), f.k.InBucket(b).Counter(), "sold_out_hits", 1)
}

// settled fails unless no transfer is open: every xfer_out empty, every
// record DONE, in-flight 0.
func (f *fixture) settled() lua.SKUStock {
	f.t.Helper()
	s := f.stock(true)
	for b := range f.n {
		if n := f.rdb.ZCard(context.Background(), f.k.InBucket(b).TransfersOut()).Val(); n != 0 {
			f.t.Fatalf("bucket %d: %d transfers still in xfer_out", b, n)
		}
	}
	if s.InFlight != 0 || s.Sent != 0 {
		f.t.Fatalf("open transfers: %+v", s)
	}
	return s
}

func await(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDemandRefillsAnEmptyBucket(t *testing.T) {
	f := newFixture(t, 1, 0, 0, 0)
	r := f.rebalancer(nil, Options{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	await(t, 5*time.Second, "the lease taken", func() bool { return f.rdb.Get(ctx, f.leaseKey).Val() == r.owner })
	f.hit(2) // a user of bucket 2 was told SOLD_OUT
	// Polled while the rebalancer runs: conserved, but the records need not
	// match the counters mid-transfer (the buckets are read one by one).
	await(t, 5*time.Second, "bucket 2 refilled and its transfer closed", func() bool {
		s := f.stock(false)
		return s.Buckets[2].Available == 1 && f.rdb.ZCard(ctx, f.k.TransfersOut()).Val() == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.settled(); got.Available != 1 || got.Buckets[0].XferOut != 1 || got.Buckets[2].XferIn != 1 {
		t.Fatalf("after the move: %+v", got.Buckets)
	}
	if f.rdb.Exists(context.Background(), f.leaseKey).Val() != 0 {
		t.Fatal("the lease was not dropped on exit")
	}
}

func TestEvennessSpreadsStock(t *testing.T) {
	f := newFixture(t, 40, 0, 0, 0)
	r := f.rebalancer(nil, Options{})
	for range 10 {
		if _, err := r.TickOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.settled()
	}
	for b, a := range f.available() {
		if a < 5 {
			t.Fatalf("bucket %d has %d of 40 after 10 ticks: %v", b, a, f.available())
		}
	}
}

// A crash at each step of a transfer; a fresh rebalancer finishes it: the
// units land in the target exactly once, the record is DONE, xfer_out is
// empty, and the SKU is conserved at every point observed.
func TestCrashAtEachStepRecovers(t *testing.T) {
	testenv.RequireFailpoints(t)
	for _, c := range []struct {
		name string
		// crash leaves the state to recover, with wantInFlight units in flight.
		crash        func(t *testing.T, f *fixture) string
		wantInFlight int64
	}{
		{"after take", func(t *testing.T, f *fixture) string { return crashAt(t, f, failpoint.RebalanceAfterTake) }, 2},
		{"after give", func(t *testing.T, f *fixture) string { return crashAt(t, f, failpoint.RebalanceAfterGive) }, 0},
		{"lost answer: take run twice, then the process dies", func(t *testing.T, f *fixture) string {
			a := lua.XferTakeArgs{TransferID: "lost-1", To: 1, K: 2, NowMS: time.Now().UnixMilli()}
			for i := range 2 {
				if res, err := lua.XferTake(context.Background(), f.rdb, f.k, a); err != nil || res.State != lua.TransferSent ||
					res.Code != []lua.XferTakeCode{lua.XferTaken, lua.XferTakeExists}[i] {
					t.Fatalf("take %d = %+v, %v", i+1, res, err)
				}
			}
			return "lost-1"
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 4, 0)
			id := c.crash(t, f)
			if s := f.stock(true); s.InFlight != c.wantInFlight || s.Sent != 1 {
				t.Fatalf("after the crash: in-flight %d, %d SENT; want %d, 1", s.InFlight, s.Sent, c.wantInFlight)
			}
			// Within the grace nothing is recovered (the transfer may be a live one's).
			if st, err := f.rebalancer(nil, Options{Grace: time.Hour, MaxMoves: 1}).recover(context.Background(), f.k, f.n); err != nil || st != 0 {
				t.Fatalf("recovery within the grace: %d, %v", st, err)
			}
			st, err := f.later().TickOnce(context.Background())
			if err != nil || st.Recovered != 1 || st.Moves != 0 {
				t.Fatalf("recovery tick = %+v, %v", st, err)
			}
			s := f.settled()
			if got := f.available(); got[0] != 2 || got[1] != 2 || s.Buckets[1].XferIn != 2 || s.Buckets[0].XferOut != 2 {
				t.Fatalf("after recovery: %+v", s.Buckets)
			}
			if rec, ok, err := lua.ReadTransfer(context.Background(), f.rdb, f.k, id); err != nil || !ok || rec.State != lua.TransferDone {
				t.Fatalf("record %s = %+v %v %v", id, rec, ok, err)
			}
			// Recovery again, and more ticks: nothing changes.
			for range 3 {
				if st, err := f.later().TickOnce(context.Background()); err != nil || st.Recovered != 0 || st.Moves != 0 {
					t.Fatalf("tick after recovery = %+v, %v", st, err)
				}
			}
			f.settled()
		})
	}
}

// crashAt runs one tick that stops at failpoint name and returns the id of
// the transfer it left.
func crashAt(t *testing.T, f *fixture, name string) string {
	t.Helper()
	fp := &failpoint.Set{}
	fp.Arm(name, 1)
	if _, err := f.rebalancer(fp, Options{}).TickOnce(context.Background()); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("tick with %s armed: %v", name, err)
	}
	ids := f.rdb.ZRange(context.Background(), f.k.TransfersOut(), 0, -1).Val()
	if len(ids) != 1 {
		t.Fatalf("xfer_out after the crash: %v", ids)
	}
	return ids[0]
}

// The take's answer lost inside one rebalancer: it retries with the same id
// and finishes the transfer once.
func TestLostTakeAnswerRetriedOnce(t *testing.T) {
	testenv.RequireFailpoints(t)
	f := newFixture(t, 4, 0)
	fp := &failpoint.Set{}
	fp.Arm(failpoint.RebalanceTakeAnswerLost, 1)
	if st, err := f.rebalancer(fp, Options{}).TickOnce(context.Background()); err != nil || st.Moves != 1 {
		t.Fatalf("tick = %+v, %v", st, err)
	}
	if s := f.settled(); s.Buckets[0].Available != 2 || s.Buckets[1].Available != 2 || s.Buckets[1].XferIn != 2 {
		t.Fatalf("after the tick: %+v", s.Buckets)
	}
}

// One unit, four buckets: it moves only when an empty bucket shows new
// sold_out_hits, once per new demand.
func TestNoMovementWithoutDemand(t *testing.T) {
	f := newFixture(t, 1, 0, 0, 0)
	r := f.rebalancer(nil, Options{})
	ticks := func(want []int64) {
		t.Helper()
		for range 5 {
			if st, err := r.TickOnce(context.Background()); err != nil || st.Moves != 0 {
				t.Fatalf("tick without new demand = %+v, %v", st, err)
			}
			if got := f.available(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("available %v, want %v", got, want)
			}
		}
	}
	ticks([]int64{1, 0, 0, 0})
	f.hit(3)
	if st, err := r.TickOnce(context.Background()); err != nil || st.Moves != 1 {
		t.Fatalf("tick with demand on bucket 3 = %+v, %v", st, err)
	}
	ticks([]int64{0, 0, 0, 1}) // the old hits are no new demand
	f.hit(1)
	f.hit(2)
	f.hit(2)
	if st, err := r.TickOnce(context.Background()); err != nil || st.Moves != 1 {
		t.Fatalf("tick with demand on buckets 1 and 2 = %+v, %v", st, err)
	}
	ticks([]int64{0, 0, 1, 0}) // the larger demand won; no bounce to bucket 1
	if s := f.settled(); s.Buckets[0].XferOut != 1 || s.Buckets[3].XferOut != 1 || s.Buckets[2].XferIn != 1 {
		t.Fatalf("transfers: %+v", s.Buckets)
	}
}

// fakeReserve takes one unit of a bucket as reserve.lua does (available −1,
// open_reserved +1), or counts a SOLD_OUT hit as the lead's reserve.lua will.
var fakeReserve = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'available') or '0') > 0 then
    redis.call('HINCRBY', KEYS[1], 'available', -1)
    redis.call('HINCRBY', KEYS[1], 'open_reserved', 1)
    return 1
end
redis.call('HINCRBY', KEYS[1], 'sold_out_hits', 1)
return 0`)

// Two rebalancers share the lease while buyers hit random buckets, and a
// third ticks beside them ignoring the lease, recovering at once; the
// holder is stopped, then the lease dropped. Every unit is sold exactly
// once and the SKU is conserved at every observation.
func TestConcurrentRebalancersConserve(t *testing.T) {
	const total = 60
	f := newFixture(t, total, 0, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt := Options{Interval: 5 * time.Millisecond, Lease: 300 * time.Millisecond}
	rs := []*Rebalancer{f.rebalancer(nil, opt), f.rebalancer(nil, opt)}
	stops := make([]context.CancelFunc, 2)
	var wg sync.WaitGroup
	for i, r := range rs {
		rctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Go(func() { _ = r.Run(rctx) })
	}
	rogue := f.rebalancer(nil, Options{Grace: time.Millisecond})
	wg.Go(func() {
		for ctx.Err() == nil {
			_, _ = rogue.TickOnce(ctx)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			b := rand.IntN(f.n)
			_ = fakeReserve.Run(ctx, f.rdb, []string{f.k.InBucket(b).Counter()}).Err()
			time.Sleep(time.Millisecond)
		}
	})
	owner := func() string { return f.rdb.Get(ctx, f.leaseKey).Val() }
	await(t, 5*time.Second, "one holds the lease", func() bool { return owner() == rs[0].owner || owner() == rs[1].owner })
	holder := 0
	if owner() == rs[1].owner {
		holder = 1
	}
	f.stock(false)
	stops[holder]()
	await(t, 5*time.Second, "the other takes the lease over", func() bool { f.stock(false); return owner() == rs[1-holder].owner })
	f.rdb.Del(ctx, f.leaseKey)
	await(t, 5*time.Second, "the lease taken again", func() bool { f.stock(false); return owner() == rs[1-holder].owner })
	await(t, 20*time.Second, "every unit sold", func() bool { return f.stock(false).OpenReserved == total })
	cancel()
	wg.Wait()
	if st, err := f.later().TickOnce(context.Background()); err != nil {
		t.Fatalf("final recovery %+v: %v", st, err)
	}
	if s := f.settled(); s.OpenReserved != total || s.Available != 0 {
		t.Fatalf("end: %+v", s)
	}
}
