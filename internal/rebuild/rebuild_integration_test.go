package rebuild_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/rebuild"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

// redisDB is a logical database of its own: the test FLUSHDBs it, which
// loses every key of the sale as FLUSHALL would, without touching other
// tests that share the Redis server.
const redisDB = 9

// lossyRedis is the test's Redis and how it loses the sale's keys: FLUSHDB
// of redisDB on the single Redis; on a Redis Cluster, which has only
// database 0 shared with every other test, every key of each bucket's hash
// tag and its lua.ActiveSKUs member (what a FLUSHALL takes from the sale).
func lossyRedis(t *testing.T, cfg config.Config, sku lua.SKU) (redis.UniversalClient, func() error) {
	ctx := context.Background()
	if cfg.RedisCluster() {
		rdb := testenv.Redis(t, cfg)
		lose := func() error {
			for _, k := range sku.All() {
				testenv.DeleteSKUKeys(ctx, rdb, k)
				if err := rdb.SRem(ctx, lua.ActiveSKUs, k.Member()).Err(); err != nil {
					return err
				}
			}
			return nil
		}
		t.Cleanup(func() { _ = lose() })
		return rdb, lose
	}
	rdb, err := redisx.OpenDB(ctx, cfg, redisDB, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.FlushDB(context.Background()); _ = rdb.Close() })
	return rdb, func() error { return rdb.FlushDB(ctx).Err() }
}

// After Redis loses everything mid-sale and is rebuilt from PostgreSQL, the
// sale goes on without overselling, and conservation holds at the end.
// With the SKU's stock in four buckets the rebuild puts each reservation
// back in its user's bucket and spreads the available units.
func TestFlushMidSaleThenRebuild(t *testing.T) {
	for _, buckets := range []int{1, 4} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) { flushMidSaleThenRebuild(t, buckets) })
	}
}

func flushMidSaleThenRebuild(t *testing.T, buckets int) {
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	stock := int64(10 + 2*(buckets-1)) // 10 in one bucket, 3 in each of four
	a := sale.Activity{ActivityID: testenv.ActivityID(), Name: "f", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, SKUs: []sale.SKU{{SKUID: 1, Stock: stock, PriceCents: 100, Buckets: buckets}}}
	k := lua.Keys{ActivityID: a.ActivityID, SKUID: 1}
	sku := lua.SKU{ActivityID: a.ActivityID, SKUID: 1, Buckets: buckets}
	rdb, lose := lossyRedis(t, cfg, sku)
	if _, err := sale.Setup(ctx, pool, rdb, a); err != nil {
		t.Fatal(err)
	}
	verify, _ := pgxpool.New(ctx, dsn)
	defer verify.Close()
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: verify, Redis: rdb, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Topic: "t", TerminalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d := testenv.Deriver(t, cfg)
	reserve := func(user int64) (events.OrderCreateRequested, bool) {
		return testenv.Reserve(t, rdb, d, sku.For(user), user)
	}
	process := func(m events.OrderCreateRequested) {
		res, err := acts.CreateOrder(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		switch res.Outcome {
		case steps.OutcomeCreated:
			acts.ProjectOrderCreated(ctx, steps.ProjectionInput{ReservationID: m.ReservationID, OrderID: res.OrderID, ActivityID: k.ActivityID, SKUID: k.SKUID, Bucket: m.Bucket})
		case steps.OutcomeRejected:
			if _, err := acts.Compensate(ctx, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: k.ActivityID, SKUID: k.SKUID, Bucket: m.Bucket}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Mid-sale: 6 processed into orders, 3 admitted with messages in flight.
	// (Users whose bucket is already empty are skipped.)
	var inflight []events.OrderCreateRequested
	admitted := 0
	for u := int64(1); admitted < 9; u++ {
		m, ok := reserve(u)
		if !ok {
			if buckets == 1 {
				t.Fatalf("user %d not admitted", u)
			}
			continue
		}
		if admitted++; admitted <= 6 {
			process(m)
		} else {
			inflight = append(inflight, m)
		}
	}
	if err := lose(); err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild.Rebuild(ctx, pool, rdb, a.ActivityID, time.Hour, false); !errors.Is(err, rebuild.ErrSaleAdmitting) {
		t.Fatalf("rebuild during the sale without force = %v", err)
	}
	skus, err := rebuild.Rebuild(ctx, pool, rdb, a.ActivityID, time.Hour, true)
	if err != nil {
		t.Fatal(err)
	}
	if s := skus[0]; s.Committed != 6 || s.Available != stock-6 || s.Initial != stock || s.Buckets != buckets {
		t.Fatalf("rebuilt %+v", s)
	}
	if snap, err := invariants.Take(ctx, pool, rdb, k.ActivityID, k.SKUID); err != nil || snap.RedisDelta() != 0 {
		t.Fatalf("after the rebuild: %+v %v", snap, err)
	} else {
		for _, b := range snap.RedisBuckets {
			if b.Balance() != 0 || b.Available < 1 {
				t.Errorf("rebuilt bucket %+v: delta %d, or no stock spread to it", b, b.Balance())
			}
		}
	}
	// A user who already holds an order is still refused after the rebuild.
	if _, ok := reserve(1); ok {
		t.Fatal("rebuild forgot a user's reservation: admitted twice")
	}
	// The sale goes on: 20 more buyers race for what is left; the in-flight
	// messages arrive late.
	var later []events.OrderCreateRequested
	for u := int64(100); u < 120+int64(60*(buckets-1)); u++ {
		if m, ok := reserve(u); ok {
			later = append(later, m)
		}
	}
	for _, m := range append(inflight, later...) {
		process(m)
	}
	snap, v, err := invariants.Check(ctx, pool, rdb, k.ActivityID, k.SKUID, false)
	if err != nil {
		t.Fatal(err)
	}
	if snap.ValidOrders > stock || snap.PGAvailable != 0 || snap.ValidOrders != stock {
		t.Fatalf("orders %d of stock %d, PG available %d: oversold or undersold", snap.ValidOrders, stock, snap.PGAvailable)
	}
	for _, x := range v {
		t.Errorf("during the sale: %s", x)
	}
	// Once quiet, a second rebuild closes the gap the lost Redis-only
	// reservations left, and every invariant holds across both stores.
	if _, err := rebuild.Rebuild(ctx, pool, rdb, a.ActivityID, time.Hour, true); err != nil {
		t.Fatal(err)
	}
	if _, v, err := invariants.Check(ctx, pool, rdb, k.ActivityID, k.SKUID, true); err != nil || len(v) > 0 {
		t.Fatalf("after the final rebuild: %v %v", v, err)
	}
}
