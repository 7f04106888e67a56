package reservation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Buckets knows how many stock buckets each SKU has (docs/scale.md), read
// once from bucket 0's meta hash, where sale set-up writes it. The count is
// fixed once a SKU is set up (sale.Setup refuses a change), so a count once
// read is kept for the life of the process. It is safe for concurrent use.
type Buckets struct {
	rdb   redis.Cmdable
	known sync.Map // lua.Keys (bucket 0) → int
}

// NewBuckets returns a Buckets reading rdb.
func NewBuckets(rdb redis.Cmdable) *Buckets { return &Buckets{rdb: rdb} }

// SKU is (activity, sku) with its bucket count. A SKU whose meta hash is
// missing (not set up, or Redis lost it) counts as one bucket, and is asked
// again next time: reserve.lua then answers NOT_CONFIGURED.
func (b *Buckets) SKU(ctx context.Context, activityID, skuID int64) (lua.SKU, error) {
	k := lua.Keys{ActivityID: activityID, SKUID: skuID}
	if n, ok := b.known.Load(k); ok {
		return lua.SKU{ActivityID: activityID, SKUID: skuID, Buckets: n.(int)}, nil
	}
	v, err := b.rdb.HMGet(ctx, k.Meta(), "start_ms", lua.MetaBuckets).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return lua.SKU{}, fmt.Errorf("read bucket count of %d/%d: %w", activityID, skuID, err)
	}
	sku := lua.SKU{ActivityID: activityID, SKUID: skuID, Buckets: 1}
	if len(v) < 2 || v[0] == nil {
		return sku, nil
	}
	if s, ok := v[1].(string); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > lua.MaxBuckets {
			return lua.SKU{}, fmt.Errorf("meta of %d/%d holds buckets %q", activityID, skuID, s)
		}
		sku.Buckets = n
	}
	b.known.Store(k, sku.Buckets)
	return sku, nil
}

// Keys is the Keys of userID's bucket of (activity, sku).
func (b *Buckets) Keys(ctx context.Context, userID, activityID, skuID int64) (lua.Keys, error) {
	sku, err := b.SKU(ctx, activityID, skuID)
	if err != nil {
		return lua.Keys{}, err
	}
	return sku.For(userID), nil
}
