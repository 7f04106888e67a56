package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/lua"
)

// BucketSale writes a fake sale of one SKU split into len(stock) buckets
// straight into Redis, as sale set-up would leave it before any request:
// bucket b's counter has initial = available = stock[b] (open_reserved,
// committed, xfer_in, xfer_out, sold_out_hits 0), every bucket's meta a sale
// window open now, bucket 0's meta the bucket count. The activity id is
// random; every key of it is deleted when t ends. It returns bucket 0's Keys.
func BucketSale(t testing.TB, rdb redis.Cmdable, stock ...int64) lua.Keys {
	t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: ActivityID(), SKUID: 1}
	t.Cleanup(func() { DeleteActivity(rdb, k.ActivityID) })
	for b, n := range stock {
		kb := k.InBucket(b)
		if err := rdb.HSet(ctx, kb.Counter(), "initial", n, "available", n, "open_reserved", 0, "committed", 0,
			"xfer_in", 0, "xfer_out", 0, "sold_out_hits", 0).Err(); err != nil {
			t.Fatalf("bucket sale: %v", err)
		}
		meta := []any{"start_ms", 0, "end_ms", int64(1) << 50, "order_deadline_ms", 300000, "payment_timeout_ms", 60000}
		if b == 0 {
			meta = append(meta, lua.MetaBuckets, len(stock))
		}
		if err := rdb.HSet(ctx, kb.Meta(), meta...).Err(); err != nil {
			t.Fatalf("bucket sale meta: %v", err)
		}
	}
	return k
}

// DeleteActivity deletes every key of activityID's SKUs (every bucket), on
// each master of a cluster (a node's SCAN sees only its own slots; a DEL
// runs on the node that holds the keys).
func DeleteActivity(rdb redis.Cmdable, activityID int64) {
	_ = redisx.ForEachMaster(context.Background(), rdb, func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, fmt.Sprintf("seckill:{%d:*", activityID), 1000).Iterator()
		for iter.Next(ctx) {
			n.Del(ctx, iter.Val())
		}
		return iter.Err()
	})
}
