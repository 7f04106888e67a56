package rebalancer

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lease keeps one process rebalancing at a time, so two do not plan
// against the same counters and move units back and forth needlessly. It is
// an optimisation only: correctness never depends on it. Every step of a
// transfer is an atomic, idempotent script on one bucket (a take never takes
// more than the bucket's available, a give applies a transfer id once, a
// close only marks a record), so two rebalancers running at once, or one that
// lost its lease mid-tick, still conserve every unit.

// DefaultLeaseKey is the lease's Redis key (outside any SKU slot).
const DefaultLeaseKey = "seckill:rebalancer:lease"

// acquireScript takes the lease if it is free or renews it if it is ours:
// KEYS[1] lease, ARGV[1] owner, ARGV[2] ttl_ms; returns 1 if held.
var acquireScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 1
end
return 0`)

// releaseScript drops the lease if it is ours: KEYS[1] lease, ARGV[1] owner.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0`)

// Acquire takes or renews the lease and reports whether this rebalancer holds it.
func (r *Rebalancer) Acquire(ctx context.Context) (bool, error) {
	n, err := acquireScript.Run(ctx, r.rdb, []string{r.opt.LeaseKey}, r.owner, r.opt.Lease.Milliseconds()).Int()
	return n == 1, err
}

// Release drops the lease if this rebalancer holds it.
func (r *Rebalancer) Release(ctx context.Context) error {
	return releaseScript.Run(ctx, r.rdb, []string{r.opt.LeaseKey}, r.owner).Err()
}

func (r *Rebalancer) releaseOnExit() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := r.Release(ctx); err != nil {
		r.log.Warn("rebalance.lease_release_failed", "error", err)
	}
	r.m.LeaseHeld.Set(0)
}
