package sale_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// initBucket writes bucket k's counter and meta as set-up does, with its
// sale ending at end, and deletes its keys when t ends.
func initBucket(t *testing.T, rdb redis.Cmdable, k lua.Keys, end time.Time) {
	t.Helper()
	if _, err := lua.InitSKU(context.Background(), rdb, k, lua.InitSKUArgs{Initial: 5, Available: 5,
		StartMS: end.Add(-time.Hour).UnixMilli(), EndMS: end.UnixMilli(), OrderDeadline: time.Minute,
		PaymentTimeout: time.Minute, Unmoved: true, MaxPerUser: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteSKUKeys(context.Background(), rdb, k) })
}

// Only a bucket whose sale ended past the grace and that owes nothing is
// finished: a live sale, one inside the grace, one with a reservation in
// send_due, one with an open transfer and one without meta are kept.
func TestPruneTakesOutOnlyFinishedBuckets(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx, now, grace := context.Background(), time.Now(), 10*time.Minute
	a := testenv.ActivityID()
	set := fmt.Sprintf("seckill:test:active_skus:prune:%d", a)
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	ended, live, inGrace, owing, moving, bare := lua.Keys{ActivityID: a, SKUID: 1}, lua.Keys{ActivityID: a, SKUID: 2},
		lua.Keys{ActivityID: a, SKUID: 3}, lua.Keys{ActivityID: a, SKUID: 4}, lua.Keys{ActivityID: a, SKUID: 5, Bucket: 1},
		lua.Keys{ActivityID: a, SKUID: 6}
	initBucket(t, rdb, ended, now.Add(-time.Hour))
	initBucket(t, rdb, live, now.Add(time.Hour))
	initBucket(t, rdb, inGrace, now.Add(-time.Minute))
	initBucket(t, rdb, owing, now.Add(-time.Hour))
	rdb.ZAdd(ctx, owing.SendDue(), redis.Z{Score: 1, Member: "00000000-0000-0000-0000-000000000001"})
	initBucket(t, rdb, moving, now.Add(-time.Hour))
	rdb.ZAdd(ctx, moving.TransfersOut(), redis.Z{Score: 1, Member: "x1"})
	t.Cleanup(func() { testenv.DeleteSKUKeys(context.Background(), rdb, bare) })
	for _, k := range []lua.Keys{ended, live, inGrace, owing, moving, bare} {
		rdb.SAdd(ctx, set, k.Member())
	}
	for _, tc := range []struct {
		k    lua.Keys
		want bool
	}{{ended, true}, {live, false}, {inGrace, false}, {owing, false}, {moving, false}, {bare, false}} {
		done, err := sale.Prune(ctx, rdb, set, tc.k, now, grace)
		if err != nil || done != tc.want {
			t.Errorf("Prune(%s) = %v, %v; want %v", tc.k.Member(), done, err, tc.want)
		}
		if in := rdb.SIsMember(ctx, set, tc.k.Member()).Val(); in == tc.want {
			t.Errorf("%s in the set after Prune: %v, want %v", tc.k.Member(), in, !tc.want)
		}
	}
	if n := len(testenv.ScanKeys(t, rdb, strings.TrimSuffix(ended.Counter(), "counter")+"*")); n == 0 {
		t.Error("pruning deleted the finished bucket's keys; compensation and release still need them")
	}
}

// reviveOnSRem is a set-up of the sale that runs just after Prune's SREM:
// it extends the sale and adds the member again, as sale.Setup does.
type reviveOnSRem struct {
	rdb redis.Cmdable
	k   lua.Keys
	set string
	ran bool
}

func (h *reviveOnSRem) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *reviveOnSRem) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *reviveOnSRem) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "srem" && !h.ran {
			h.ran = true
			h.rdb.HSet(ctx, h.k.Meta(), "end_ms", time.Now().Add(time.Hour).UnixMilli())
			h.rdb.SAdd(ctx, h.set, h.k.Member())
		}
		return err
	}
}

// A set-up that extends the sale while Prune runs is never undone: the
// member Prune removed is back in the set and Prune says it pruned nothing.
func TestPrunePutsBackABucketThatCameAlive(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx, now := context.Background(), time.Now()
	k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 1}
	set := fmt.Sprintf("seckill:test:active_skus:revive:%d", k.ActivityID)
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	initBucket(t, rdb, k, now.Add(-time.Hour))
	rdb.SAdd(ctx, set, k.Member())
	other := testenv.Redis(t, cfg) // the set-up's own connection
	hook := &reviveOnSRem{rdb: other, k: k, set: set}
	rdb.AddHook(hook)
	done, err := sale.Prune(ctx, rdb, set, k, time.Now(), time.Minute)
	if !hook.ran {
		t.Fatal("Prune never removed the member: the race was not staged")
	}
	if err != nil || done {
		t.Errorf("Prune = %v, %v; want false, nil (the bucket came alive)", done, err)
	}
	if !rdb.SIsMember(ctx, set, k.Member()).Val() {
		t.Error("the revived bucket is out of the set: its send_due would never be scanned")
	}
}
