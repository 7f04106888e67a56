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

// Buckets knows how many stock buckets each SKU has (docs/scale.md) and its
// sale's per-user cap (docs/spec.md#user-cap), read once from bucket 0's
// meta hash, where sale set-up writes them. Both are fixed once set up
// (sale.Setup refuses a change), so what was read is kept for the life of
// the process. It is safe for concurrent use.
type Buckets struct {
	rdb   redis.Cmdable
	known sync.Map // lua.Keys (bucket 0) → lua.SKU
}

// NewBuckets returns a Buckets reading rdb.
func NewBuckets(rdb redis.Cmdable) *Buckets { return &Buckets{rdb: rdb} }

// SKU is (activity, sku) with its bucket count and cap. A SKU whose meta
// hash is missing (not set up, or Redis lost it) counts as one bucket, and
// is asked again next time: reserve.lua then answers NOT_CONFIGURED.
func (b *Buckets) SKU(ctx context.Context, activityID, skuID int64) (lua.SKU, error) {
	k := lua.Keys{ActivityID: activityID, SKUID: skuID}
	if s, ok := b.known.Load(k); ok {
		return s.(lua.SKU), nil
	}
	v, err := b.rdb.HMGet(ctx, k.Meta(), "start_ms", lua.MetaBuckets, lua.MetaMaxPerUser).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return lua.SKU{}, fmt.Errorf("read bucket count of %d/%d: %w", activityID, skuID, err)
	}
	n, known, err := bucketCount(v)
	if err != nil {
		return lua.SKU{}, fmt.Errorf("meta of %d/%d %w", activityID, skuID, err)
	}
	c, err := maxPerUser(v)
	if err != nil {
		return lua.SKU{}, fmt.Errorf("meta of %d/%d %w", activityID, skuID, err)
	}
	sku := lua.SKU{ActivityID: activityID, SKUID: skuID, Buckets: n, MaxPerUser: c}
	if known {
		b.known.Store(k, sku)
	}
	return sku, nil
}

// maxPerUser reads the sale's cap from a meta hash's max_per_user field
// (HMGET's third value): 1 when it is missing (a sale set up before the cap
// existed: PostgreSQL's column default), an error for anything but a number
// from 1 to lua.MaxPerUser.
func maxPerUser(v []any) (int, error) {
	if len(v) < 3 || v[2] == nil {
		return 1, nil
	}
	s, _ := v[2].(string)
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > lua.MaxPerUser {
		return 0, fmt.Errorf("holds max_per_user %q", s)
	}
	return n, nil
}

// bucketCount reads a SKU's bucket count from its meta hash's start_ms and
// buckets fields (HMGET): one, not known (asked again), when the meta is
// missing (no start_ms); one, known, when it has no buckets field; an error
// for a count that is not a number between 1 and lua.MaxBuckets.
func bucketCount(v []any) (n int, known bool, err error) {
	if len(v) < 2 || v[0] == nil {
		return 1, false, nil
	}
	s, ok := v[1].(string)
	if !ok {
		return 1, true, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 1 || n > lua.MaxBuckets {
		return 0, false, fmt.Errorf("holds buckets %q", s)
	}
	return n, true, nil
}

// Keys is the Keys of userID's bucket of (activity, sku).
func (b *Buckets) Keys(ctx context.Context, userID, activityID, skuID int64) (lua.Keys, error) {
	sku, err := b.SKU(ctx, activityID, skuID)
	if err != nil {
		return lua.Keys{}, err
	}
	return sku.For(userID), nil
}
