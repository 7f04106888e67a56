// Package rebalancer moves stock between the buckets of a hot SKU
// (docs/scale.md): a user always reserves in one bucket, so a bucket can be
// sold out while another still has units. Each tick it finishes transfers a
// crash left half done (recovery), then plans new ones from every bucket's
// available and sold_out_hits (Plan) and runs each as take → give → close
// (lua.XferTake, lua.XferGive, lua.XferClose) with one transfer id.
package rebalancer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/poll"
	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/lua"
)

// Options of a Rebalancer.
type Options struct {
	Interval time.Duration // between ticks (default 100ms)
	// Grace: a transfer still SENT this long after its take is finished by
	// recovery (default 2s). Shorter than a tick's own take → give → close
	// only costs a harmless repeat (every step is idempotent).
	Grace time.Duration
	// TTL of the receiving bucket's markers and of DONE records; required.
	// A marker must outlive every retry of its give: the reservation TTL.
	TTL time.Duration
	// MaxMoves bounds the transfers per SKU per tick (default 4).
	MaxMoves int
	// Attempts per script call on a Redis error, with the same transfer id (default 3).
	Attempts int
	// Lease is the lease's TTL (default max(1s, 10 × Interval)); LeaseKey
	// its key (default DefaultLeaseKey). See lease.go: not needed for correctness.
	Lease    time.Duration
	LeaseKey string
	// ActiveSKUs is the set of bucket members to walk (default lua.ActiveSKUs);
	// a test uses a set of its own.
	ActiveSKUs string
}

// Rebalancer rebalances every bucketed SKU of ActiveSKUs.
type Rebalancer struct {
	rdb   redis.Cmdable
	opt   Options
	m     *metrics.Rebalance
	fp    *failpoint.Set
	log   *slog.Logger
	owner string
	now   func() time.Time

	mu       sync.Mutex
	prevHits map[lua.Keys][]int64 // bucket 0's Keys → each bucket's sold_out_hits at the last tick
}

// New returns a Rebalancer; rdb, m and log are required, fp may be nil.
func New(rdb redis.Cmdable, opt Options, m *metrics.Rebalance, fp *failpoint.Set, log *slog.Logger) (*Rebalancer, error) {
	if rdb == nil || m == nil || log == nil {
		return nil, errors.New("rebalancer: nil dependency")
	}
	if opt.TTL <= 0 {
		return nil, fmt.Errorf("rebalancer: options %+v: TTL must be positive", opt)
	}
	if opt.Interval <= 0 {
		opt.Interval = 100 * time.Millisecond
	}
	if opt.Grace <= 0 {
		opt.Grace = 2 * time.Second
	}
	if opt.MaxMoves <= 0 {
		opt.MaxMoves = 4
	}
	if opt.Attempts <= 0 {
		opt.Attempts = 3
	}
	if opt.Lease <= 0 {
		opt.Lease = max(time.Second, 10*opt.Interval)
	}
	if opt.LeaseKey == "" {
		opt.LeaseKey = DefaultLeaseKey
	}
	if opt.ActiveSKUs == "" {
		opt.ActiveSKUs = lua.ActiveSKUs
	}
	return &Rebalancer{rdb: rdb, opt: opt, m: m, fp: fp, log: log, owner: uuid.NewString(), now: time.Now,
		prevHits: map[lua.Keys][]int64{}}, nil
}

// Run ticks until ctx ends, while it holds the lease, and drops the lease on exit.
func (r *Rebalancer) Run(ctx context.Context) error {
	held := func(h bool) {
		if h {
			r.m.LeaseHeld.Set(1)
		} else {
			r.m.LeaseHeld.Set(0)
		}
	}
	return poll.Run(ctx, poll.Options{Interval: r.opt.Interval, Log: r.log, FailedEvent: "rebalance.tick_failed",
		Lease: &poll.Lease{Acquire: r.Acquire, Held: held, Release: r.releaseOnExit, FailedEvent: "rebalance.lease_failed"}},
		func(ctx context.Context) (bool, error) {
			_, err := r.TickOnce(ctx)
			return false, err
		})
}

// Stats is what one tick did.
type Stats struct {
	SKUs      int   // bucketed SKUs seen
	Moves     int   // transfers planned
	Recovered int   // SENT transfers finished by recovery
	InFlight  int64 // Σ xfer_out − Σ xfer_in over the SKUs, as read before the moves
}

// TickOnce recovers and rebalances every bucketed SKU once, lease or not,
// and returns what it did. A SKU it fails on (its Redis shard down, a key of
// the wrong type, a failpoint) is counted, logged and left for the next
// tick: the other SKUs are served all the same, and the error (a
// *skuloop.Error) names every SKU that failed. InFlight then covers the
// SKUs read.
func (r *Rebalancer) TickOnce(ctx context.Context) (Stats, error) {
	var st Stats
	members, err := r.rdb.SMembers(ctx, r.opt.ActiveSKUs).Result()
	if err != nil {
		return st, fmt.Errorf("list active skus: %w", err)
	}
	pass := skuloop.NewPass("rebalance", r.m.SKUFailures, r.log, r.rdb)
	seen := map[lua.Keys]bool{}
	for _, member := range members {
		k, err := lua.ParseMember(member)
		if err != nil {
			r.log.Error("rebalance.bad_active_sku", "member", member, "error", err)
			continue
		}
		k = k.InBucket(0)
		if seen[k] {
			continue
		}
		seen[k] = true
		err = pass.Unreachable(ctx, k.Meta())
		n := 0
		if err == nil {
			n, err = lua.BucketCount(ctx, r.rdb, k)
		}
		if err == nil && n > 1 {
			st.SKUs++
			if err = pass.Unreachable(ctx, bucketKeys(k, n)...); err == nil {
				err = r.tickSKU(ctx, k, n, &st)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return st, fmt.Errorf("sku %s: %w", k.Member(), err)
			}
			pass.Fail(k.ActivityID, k.SKUID, 0, err)
		}
	}
	r.m.InFlight.Set(float64(st.InFlight))
	return st, pass.Err()
}

// bucketKeys is a key of each of k's n buckets (each bucket is a slot of its own).
func bucketKeys(k lua.Keys, n int) []string {
	out := make([]string, n)
	for b := range n {
		out[b] = k.InBucket(b).Counter()
	}
	return out
}

func (r *Rebalancer) tickSKU(ctx context.Context, k lua.Keys, n int, st *Stats) error {
	rec, err := r.recover(ctx, k, n)
	st.Recovered += rec
	if err != nil {
		return err
	}
	bs, err := lua.ReadBuckets(ctx, r.rdb, k, n)
	if err != nil {
		return err
	}
	view := make([]Bucket, n)
	hits := make([]int64, n)
	for b, s := range bs {
		view[b] = Bucket{Available: s.Available, Hits: s.SoldOutHits, Absent: !s.Exists}
		hits[b] = s.SoldOutHits
		st.InFlight += s.XferOut - s.XferIn
	}
	r.mu.Lock()
	prev := r.prevHits[k]
	r.prevHits[k] = hits
	r.mu.Unlock()
	moves := Plan(view, prev, r.opt.MaxMoves)
	st.Moves += len(moves)
	for _, m := range moves {
		if err := r.move(ctx, k, m); err != nil {
			return err
		}
	}
	return nil
}
