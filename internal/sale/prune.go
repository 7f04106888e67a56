package sale

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// DefaultPruneGrace is how long after a sale's end its buckets stay in
// lua.ActiveSKUs at least (clock skew between hosts, a late set-up).
const DefaultPruneGrace = 10 * time.Minute

// Finished reports whether bucket k is done with for the loops that walk
// lua.ActiveSKUs (send-due scanner, rebalancer, explain's search): its sale
// ended more than grace before now (reserve.lua admits nobody from end_ms on),
// no reservation waits in its send_due (send_done.lua keeps one there for as
// long as it is RESERVED in Redis) and no stock transfer out of it is still
// open. A bucket without meta (never set up, or lost with a Redis flush
// until a rebuild) is not finished: nothing is known of its end.
func Finished(ctx context.Context, rdb redis.Cmdable, k lua.Keys, now time.Time, grace time.Duration) (bool, error) {
	pipe := rdb.Pipeline()
	end := pipe.HGet(ctx, k.Meta(), "end_ms")
	due := pipe.ZCard(ctx, k.SendDue())
	xfer := pipe.ZCard(ctx, k.TransfersOut())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("read %s: %w", k.Meta(), err)
	}
	if end.Err() != nil {
		return false, nil
	}
	endMS, err := strconv.ParseInt(end.Val(), 10, 64)
	if err != nil {
		return false, nil // not a time: leave it to an operator
	}
	return now.After(time.UnixMilli(endMS).Add(grace)) && due.Val() == 0 && xfer.Val() == 0, nil
}

// Prune takes bucket k out of set (lua.ActiveSKUs, or a test's own set) when
// it is Finished and reports whether it did. The keys of the bucket stay:
// compensation and release of units still use them, and explain finds a
// pruned reservation through PostgreSQL, which knows every one by then.
// Set-up and rebuild write a bucket's meta and send_due before they add its
// member, so Prune looks again after the removal and puts the member back
// if one of them made the bucket live meanwhile: a live bucket is never
// left out of the set.
func Prune(ctx context.Context, rdb redis.Cmdable, set string, k lua.Keys, now time.Time, grace time.Duration) (bool, error) {
	done, err := Finished(ctx, rdb, k, now, grace)
	if err != nil || !done {
		return false, err
	}
	if err := rdb.SRem(ctx, set, k.Member()).Err(); err != nil {
		return false, fmt.Errorf("prune %s from %s: %w", k.Member(), set, err)
	}
	still, err := Finished(ctx, rdb, k, now, grace)
	if err == nil && still {
		return true, nil
	}
	if addErr := rdb.SAdd(ctx, set, k.Member()).Err(); addErr != nil {
		return false, fmt.Errorf("put %s back in %s after it came alive: %w", k.Member(), set, addErr)
	}
	return false, err
}
