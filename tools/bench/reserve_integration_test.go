package bench

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// A tiny `bench reserve` against the stack: every HTTP case is
// driven by wrk, and Redis holds exactly what wrk was answered.
func TestReserveWithWrkIntegration(t *testing.T) {
	cfg := testenv.Require(t)
	if cfg.RedisCluster() {
		t.Skip("the reservation bench measures the single Redis (redis-benchmark drives one server); SECKILL_REDIS_CLUSTER_ADDRS is set")
	}
	for _, tool := range []string{"wrk", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not on PATH (scripts/stack.sh up installs it): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, warm = 500, 50
	o := ReserveOptions{Requests: n, Concurrency: 10, Warmup: warm, RedisBenchmark: "redis-benchmark", Timeout: 2 * time.Minute,
		Topic: Topic, FixedRateDuration: time.Second, Keep: true}
	var log strings.Builder
	rep, err := ReserveReport(ctx, cfg, o, &log)
	if rep != nil {
		rdb := testenv.Redis(t, cfg)
		pool, perr := pgxpool.New(ctx, cfg.PostgresDSN)
		if perr != nil {
			t.Fatal(perr)
		}
		defer pool.Close()
		skus := []sale.SKU{{SKUID: benchSKURaw}, {SKUID: benchSKUHTTP}, {SKUID: benchSKUSoldOut}, {SKUID: benchSKUFixed}}
		defer func() {
			if err := benchCleanup(context.Background(), rdb, pool, rep.ActivityID, skus, t.Logf); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}()
		counter := func(sku int64) int64 {
			v, err := rdb.HGet(ctx, lua.Keys{ActivityID: rep.ActivityID, SKUID: sku}.Counter(), "reserved_total").Int64()
			if errors.Is(err, redis.Nil) {
				return 0 // never reserved
			}
			if err != nil {
				t.Fatalf("reserved_total of SKU %d: %v", sku, err)
			}
			return v
		}
		hi, f := rep.Case(caseHTTPInStock), rep.Case(caseFixedRate)
		if hi == nil || f == nil {
			t.Fatalf("cases missing: %+v\n%s", rep.Cases, log.String())
		}
		// Redis admitted the warm-up and every measured request, and no more.
		if got := counter(benchSKUHTTP); got != n+warm || hi.Reservations != n || hi.Requests != n {
			t.Errorf("HTTP in-stock: Redis reserved_total %d, case %+v; want %d", got, hi, n+warm)
		}
		if got := counter(benchSKUFixed); got != int64(f.Requests+warm) || f.Reservations != int64(f.Requests) || f.TargetRPS <= 0 {
			t.Errorf("fixed rate: Redis reserved_total %d, case %+v", got, f)
		}
		if got := counter(benchSKUSoldOut); got != 0 {
			t.Errorf("sold-out SKU reserved %d", got)
		}
		for _, c := range rep.Cases {
			if c.Path == "http" && (c.Loadgen != LoadGenWrk || c.GatewayUS <= 0 || c.CPU.ChildUS <= 0) {
				t.Errorf("%s: not driven by wrk, or no CPU split: %+v", c.Name, c)
			}
		}
		if len(rep.Failures) > 0 {
			t.Errorf("failures: %v\n%s", rep.Failures, log.String())
		}
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
}
