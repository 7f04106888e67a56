package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/platform/backoff"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/rebuild"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/tools/flashsale"
	"github.com/seckill/seckill/workers/sagastarter"
)

// A Redis Cluster master dies for good in the middle of a burst (SIGKILL,
// not restarted until the end): its replica is promoted, admission goes on
// there, and whatever the asynchronous replication had not carried over is
// found by reconciliation and repaired by the documented path (rebuild the
// sale's Redis from PostgreSQL, reconcile again). PostgreSQL never sells
// more than its stock and every invariant holds at the end. Run by
// `make test-redis-failover`, which starts a cluster with a replica per
// master; it kills a node of the shared stack, so nothing else runs beside it.
func TestRedisClusterMasterFailover(t *testing.T) {
	if os.Getenv("SECKILL_FAILOVER") != "redis" {
		t.Skip("kills a Redis Cluster master: run by make test-redis-failover (SECKILL_FAILOVER=redis)")
	}
	cfg := e2eConfig(t)
	if !cfg.RedisCluster() {
		t.Fatal("SECKILL_REDIS_CLUSTER_ADDRS is not set: make test-redis-failover sets it")
	}
	ctx := context.Background()
	conns, err := app.Open(ctx, cfg, "seckill-e2e-failover", true, logger(), nil)
	if err != nil {
		t.Fatalf("connect to the stack: %v", err)
	}
	t.Cleanup(conns.Close)
	cc, ok := conns.Redis.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Redis client is %T, not a cluster client", conns.Redis)
	}
	requireReplicas(ctx, t, cc)
	t.Cleanup(func() { stackUp(t, "redis-cluster", "up") })

	const stock, buyers = 600, 1000
	activityID := testenv.ActivityID()
	k := lua.Keys{ActivityID: activityID, SKUID: flashsale.SKUID}
	var fo failover
	rep, err := flashsale.Run(ctx, cfg, logger(), flashsale.Options{ActivityID: activityID, Stock: stock, Buyers: buyers,
		Concurrency: 16, RetryUnavailable: 45 * time.Second, Timeout: 4 * time.Minute, Progress: testWriter{t},
		Disrupt: func(ctx context.Context) error { return fo.kill(ctx, cc, k.Counter()) }})
	if err != nil {
		t.Fatalf("sale: %v (report so far %+v)", err, rep)
	}
	t.Logf("failover: master 127.0.0.1:%d SIGKILLed, replica 127.0.0.1:%d promoted %s later (cluster ok on it %s after the kill)",
		fo.master, fo.replica, fo.promoted.Round(time.Millisecond), fo.ok.Round(time.Millisecond))
	t.Logf("callers: %v; %d admitted after the promotion; admission %s, drain %s",
		rep.HTTP, rep.AcceptedAfterDisrupt, rep.AdmitTime.Round(time.Millisecond), rep.DrainTime.Round(time.Millisecond))
	if rep.AcceptedAfterDisrupt == 0 {
		t.Errorf("nothing admitted after the replica took over (answers %v)", rep.HTTP)
	}
	if n := rep.HTTP[-1]; n > 0 {
		t.Errorf("%d buyers got no answer within %s of retrying", n, 45*time.Second)
	}
	before := rep.Snapshot
	t.Logf("before repair: PostgreSQL %d orders of %d; Redis available %d, open %d, committed %d (Redis delta %d); %d violations",
		before.ValidOrders, before.PGInitial, before.RedisAvailable, before.RedisOpen, before.RedisCommitted, before.RedisDelta(), len(rep.Violations))
	for _, v := range rep.Violations {
		t.Logf("found before repair: %s", v)
	}
	if before.ValidOrders > before.PGInitial || before.PGAvailable < 0 {
		t.Fatalf("PostgreSQL oversold: %d orders for %d units (available %d)", before.ValidOrders, before.PGInitial, before.PGAvailable)
	}
	if int64(rep.Accepted) != rep.Orders+rep.Compensated+rep.Manual {
		t.Errorf("%d admitted but %d orders + %d compensated + %d manual", rep.Accepted, rep.Orders, rep.Compensated, rep.Manual)
	}

	rec := failoverReconciler(t, conns, cfg.TemporalTaskQueue)
	first, err := rec.Run(ctx, activityID)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	t.Logf("reconciliation found: %v", first.Summary)
	skus, err := rebuild.Rebuild(ctx, conns.Pool, conns.Redis, activityID, cfg.ReservationTTL, true)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	t.Logf("rebuild wrote %+v", skus)
	again, err := rec.Run(ctx, activityID)
	if err != nil {
		t.Fatalf("reconcile after the rebuild: %v", err)
	}
	for _, a := range again.Anomalies {
		t.Errorf("after the rebuild, reconciliation still finds %s %s: %s", a.Type, a.Object, a.Detail)
	}
	after, violations, err := invariants.Check(ctx, conns.Pool, conns.Redis, activityID, flashsale.SKUID, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations {
		t.Errorf("after the repair: %s", v)
	}
	t.Logf("units lost in Redis by the failover: available %+d, committed %+d (recovered by the rebuild); after: %+v",
		after.RedisAvailable-before.RedisAvailable, after.RedisCommitted-before.RedisCommitted, after)
	if after.ValidOrders != rep.Orders || after.ValidOrders > stock {
		t.Errorf("%d valid orders after the repair, %d before, stock %d", after.ValidOrders, rep.Orders, stock)
	}
}

// failover is the master killed and what it took for its replica to take over.
type failover struct {
	master, replica int
	promoted, ok    time.Duration
}

// kill SIGKILLs the master of key's slot and waits until one of its replicas
// is a master and sees the cluster ok.
func (f *failover) kill(ctx context.Context, cc *redis.ClusterClient, key string) error {
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return err
	}
	f.master = portOf(m.Options().Addr)
	replicas, err := replicasOf(ctx, m)
	if err != nil || len(replicas) == 0 {
		return fmt.Errorf("replicas of 127.0.0.1:%d: %v %v", f.master, replicas, err)
	}
	at := time.Now()
	if err := killStackProcess(fmt.Sprintf("redis-cluster-%d", f.master)); err != nil {
		return err
	}
	for ctx.Err() == nil {
		for _, r := range replicas {
			node := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r), Password: cc.Options().Password})
			role, _ := node.Do(ctx, "ROLE").Slice()
			info, _ := node.ClusterInfo(ctx).Result()
			_ = node.Close()
			if len(role) > 0 && role[0] == "master" {
				if f.replica == 0 {
					f.replica, f.promoted = r, time.Since(at)
				}
				if strings.Contains(info, "cluster_state:ok") {
					f.ok = time.Since(at)
					return nil
				}
			}
		}
		if err := backoff.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// replicasOf lists the ports of the replicas of master m.
func replicasOf(ctx context.Context, m *redis.Client) ([]int, error) {
	role, err := m.Do(ctx, "ROLE").Slice()
	if err != nil {
		return nil, err
	}
	if len(role) < 3 || role[0] != "master" {
		return nil, fmt.Errorf("ROLE answered %v", role)
	}
	rows, _ := role[2].([]any)
	var out []int
	for _, row := range rows {
		if r, ok := row.([]any); ok && len(r) >= 2 {
			if p, err := strconv.Atoi(fmt.Sprint(r[1])); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// requireReplicas fails the test unless every master has a replica.
func requireReplicas(ctx context.Context, t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		rs, err := replicasOf(ctx, m)
		if err == nil && len(rs) == 0 {
			err = fmt.Errorf("master %s has no replica (scripts/stack.sh redis-cluster up with SECKILL_REDIS_CLUSTER_REPLICAS=1 adds them)", m.Options().Addr)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func failoverReconciler(t *testing.T, conns *app.Conns, taskQueue string) *reconcile.Reconciler {
	t.Helper()
	rec, err := reconcile.New(conns.Pool, conns.Redis, testenv.Stores(t, conns.Pool, conns.Redis, conns.Provider),
		metrics.NewReconcile(prometheus.NewRegistry()), logger(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sagas, err := sagastarter.NewControl(conns.Temporal, taskQueue)
	if err != nil {
		t.Fatal(err)
	}
	rec.SetSagas(sagas)
	return rec
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
