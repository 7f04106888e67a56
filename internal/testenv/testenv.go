// Package testenv connects integration tests to the project's real stack
// (scripts/stack.sh). Tests that need it call Require: with
// SECKILL_INTEGRATION=1 (set by `make test`) a missing service fails the test;
// without it the test is skipped, so `go test ./...` on a bare machine still
// runs the unit tests.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/migrations"
)

// Require skips t unless integration tests are switched on, and returns the
// configuration (defaults plus environment) pointing at the stack.
func Require(t testing.TB) config.Config {
	t.Helper()
	if os.Getenv("SECKILL_INTEGRATION") != "1" {
		t.Skip("integration test: set SECKILL_INTEGRATION=1 and start the stack (make up)")
	}
	if os.Getenv("SECKILL_ENV") == "" {
		_ = os.Setenv("SECKILL_ENV", "development") // the local stack's secrets are the development ones
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("load config: %v", err)
	}
	// Tests talk to topics and a consumer group of their own, so a demo or a
	// worker on the same stack never sees test traffic (and the reverse).
	cfg.TopicOrderCreate = TopicOrderCreate
	cfg.TopicEvents = TopicEvents
	cfg.StarterGroup = "saga-starter-test"
	// And a task queue of their own: a versioned worker of the stack's
	// binaries (make run, the README block) makes its build the current
	// version of seckill-saga, where a test binary's unversioned workers
	// would get no task (docs/operations.md, "Deploying the saga worker").
	cfg.TemporalTaskQueue = TaskQueue
	return cfg
}

// RequireFailpoints is for tests that arm failpoints: they need a build
// with -tags failpoints (`make test` has it). Without it the test fails when
// integration tests are on, and is skipped otherwise.
func RequireFailpoints(t testing.TB) {
	t.Helper()
	if failpoint.Enabled {
		return
	}
	if os.Getenv("SECKILL_INTEGRATION") == "1" {
		t.Fatal("this test arms failpoints: run it with -tags failpoints (make test does)")
	}
	t.Skip("arms failpoints: build with -tags failpoints")
}

// TaskQueue is the tests' Temporal task queue (Require sets it).
const TaskQueue = "seckill-saga-test"

// Topics the tests use (created by scripts/stack.sh). The end-to-end tests
// have their own pair (package e2e), so their saga starter never replays the
// messages other tests leave behind.
const (
	TopicOrderCreate    = "seckill_test_create"
	TopicEvents         = "seckill_test_events"
	TopicE2EOrderCreate = "seckill_e2e_create"
	TopicE2EEvents      = "seckill_e2e_events"
	// TopicDeadLetterTest carries the dead-letter test's messages only, so its
	// fresh consumer groups do not wade through every other test's backlog.
	TopicDeadLetterTest = "seckill_test_dlq"
)

// Database creates a fresh database on the stack's PostgreSQL, applies the
// migrations and drops it when the test ends. It returns its DSN and a pool.
func Database(t testing.TB, cfg config.Config) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("seckill_t_%d_%x", time.Now().Unix(), RandomUint64()&0xffffff)
	admin, err := pgx.Connect(ctx, cfg.PostgresDSN)
	if err != nil {
		t.Fatalf("connect to postgres (is the stack up? make up): %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	dsn := withDatabase(t, cfg.PostgresDSN, name)
	if _, err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	pool, err := pg.Open(ctx, dsn, 32)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() {
		pool.Close()
		c, err := pgx.Connect(context.Background(), cfg.PostgresDSN)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return dsn, pool
}

func withDatabase(t testing.TB, dsn, db string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	u.Path = "/" + strings.TrimPrefix(db, "/")
	return u.String()
}

// Redis returns a client of the stack's Redis with the scripts loaded: the
// Redis Cluster when SECKILL_REDIS_CLUSTER_ADDRS is set (make
// test-redis-cluster), else the single Redis. Tests share it and keep apart
// by random activity ids (ActivityID), never by logical database.
func Redis(t testing.TB, cfg config.Config) redis.UniversalClient {
	t.Helper()
	c, err := redisx.Dial(context.Background(), cfg, 64)
	if err != nil {
		t.Fatalf("redis (is the stack up? make up): %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RandomUint64 is a random number for test-unique names and IDs.
func RandomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// ActivityID returns a random positive activity id so tests sharing one Redis
// never touch each other's keys.
func ActivityID() int64 { return int64(RandomUint64()>>20) + 1 }

// Deriver builds the stable-ID deriver of cfg.
func Deriver(t testing.TB, cfg config.Config) *ids.Deriver {
	t.Helper()
	keys, err := cfg.IDKeys()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ids.NewDeriver(keys, cfg.IDKeyVersion)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Reserve admits user for k in Redis with lua/reserve.lua, as the gateway
// does, and returns the ORDER_CREATE_REQUESTED the gateway would send; ok is
// false when the script refused (sold out, already reserved, ...).
func Reserve(t testing.TB, rdb redis.Scripter, d *ids.Deriver, k lua.Keys, user int64) (m events.OrderCreateRequested, ok bool) {
	t.Helper()
	req := uuid.New()
	id, err := d.ForRequest(0, k.ActivityID, k.SKUID, user, req)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	res, err := lua.Reserve(context.Background(), rdb, k, lua.ReserveArgs{ReservationID: id.ReservationID.String(),
		MessageID: id.MessageID.String(), RequestID: req.String(), UserID: user, NowMS: now, KeyVersion: id.KeyVersion,
		SchemaVersion: ids.SchemaVersion, TTL: time.Hour, SendDueAtMS: now + 3000})
	if err != nil {
		t.Fatalf("reserve user %d: %v", user, err)
	}
	if res.Code != lua.ReserveAdmitted {
		return m, false
	}
	return reservation.Fields{ReservationID: id.ReservationID, MessageID: id.MessageID, RequestID: req, ActivityID: k.ActivityID,
		SKUID: k.SKUID, UserID: user, Bucket: k.Bucket, SchemaVersion: ids.SchemaVersion, KeyVersion: id.KeyVersion, ReservedAtMS: now,
		DeadlineMS: res.DeadlineMS}.Message(), true
}

// MustReserve is Reserve that fails the test when the script refuses.
func MustReserve(t testing.TB, rdb redis.Scripter, d *ids.Deriver, k lua.Keys, user int64) events.OrderCreateRequested {
	t.Helper()
	m, ok := Reserve(t, rdb, d, k, user)
	if !ok {
		t.Fatalf("user %d not admitted", user)
	}
	return m
}

// Stores builds the stores reconciliation repairs through, on pool and rdb
// (provider may be nil: no provider checks).
func Stores(t testing.TB, pool *pgxpool.Pool, rdb redis.Cmdable, provider payments.Provider) reconcile.Stores {
	t.Helper()
	inv, err := inventory.NewStore(inventory.Deps{Pool: pool, Redis: rdb, Log: slog.New(slog.DiscardHandler), TerminalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return reconcile.Stores{Inventory: inv, Payments: payments.NewStore(pool, nil), Provider: provider}
}

// Sale sets up a running one-SKU sale (PostgreSQL and Redis) at priceCents for a test and
// removes its Redis keys when the test ends.
func Sale(t testing.TB, pool *pgxpool.Pool, rdb redis.Cmdable, skuID, stock, priceCents int64) lua.Keys {
	t.Helper()
	return BucketedSale(t, pool, rdb, skuID, stock, priceCents, 1).Bucket(0)
}

// BucketedSale is Sale with the SKU's Redis stock split into buckets.
func BucketedSale(t testing.TB, pool *pgxpool.Pool, rdb redis.Cmdable, skuID, stock, priceCents int64, buckets int) lua.SKU {
	t.Helper()
	ctx := context.Background()
	a := sale.Activity{ActivityID: ActivityID(), Name: "test", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300,
		SKUs: []sale.SKU{{SKUID: skuID, Stock: stock, PriceCents: priceCents, Buckets: buckets}}}
	if _, err := sale.Setup(ctx, pool, rdb, a); err != nil {
		t.Fatal(err)
	}
	sku := lua.SKU{ActivityID: a.ActivityID, SKUID: skuID, Buckets: buckets}
	t.Cleanup(func() {
		for _, k := range sku.All() {
			rdb.SRem(ctx, lua.ActiveSKUs, k.Member())
			DeleteSKUKeys(ctx, rdb, k)
		}
	})
	return sku
}

// DeleteSKUKeys deletes every Redis key of one (activity, sku). Its keys
// share a hash tag, so they live on one node: KEYS runs on the master of the
// tag's slot (KEYS through a cluster client asks one arbitrary node).
func DeleteSKUKeys(ctx context.Context, rdb redis.Cmdable, k lua.Keys) {
	node, err := redisx.NodeFor(ctx, rdb, k.Counter())
	if err != nil {
		return
	}
	if ks, _ := node.Keys(ctx, strings.TrimSuffix(k.Counter(), "counter")+"*").Result(); len(ks) > 0 {
		node.Del(ctx, ks...)
	}
}

// ScanKeys is every key matching match, sorted: SCAN on every master of a
// cluster (one node's SCAN sees only its slots), on the one Redis otherwise.
func ScanKeys(t testing.TB, rdb redis.Cmdable, match string) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	err := redisx.ForEachMaster(context.Background(), rdb, func(ctx context.Context, n *redis.Client) error {
		it := n.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			out = append(out, it.Val())
			mu.Unlock()
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
