// Package e2e runs whole flash sales through the real stack: HTTP gateway →
// Redis → RocketMQ → saga starter → Temporal → PostgreSQL, with the outbox
// relay and send-due scanner running, and checks the invariants.
package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/tools/flashsale"
)

func e2eConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := testenv.Require(t)
	dsn, _ := testenv.Database(t, cfg)
	cfg.PostgresDSN = dsn
	cfg.TopicOrderCreate, cfg.TopicEvents = testenv.TopicE2EOrderCreate, testenv.TopicE2EEvents
	cfg.StarterGroup = "saga-starter-e2e"
	cfg.TemporalTaskQueue = fmt.Sprintf("e2e-%x", testenv.RandomUint64())
	cfg.SendDueDelay = time.Second
	return cfg
}

func logger() *slog.Logger {
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func run(t *testing.T, cfg config.Config, opts flashsale.Options) flashsale.Report {
	t.Helper()
	return runWith(t, cfg, logger(), opts)
}

// runWith is run with the processes' logger given.
func runWith(t *testing.T, cfg config.Config, log *slog.Logger, opts flashsale.Options) flashsale.Report {
	t.Helper()
	opts.Progress = testWriter{t}
	rep, err := flashsale.Run(context.Background(), cfg, log, opts)
	if err != nil {
		t.Fatalf("sale: %v (report so far %+v)", err, rep)
	}
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	return rep
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Stock N, M ≫ N buyers: exactly N orders and every invariant holds.
func TestFlashSaleExactlyNOrders(t *testing.T) {
	const stock, buyers = 30, 600
	rep := run(t, e2eConfig(t), flashsale.Options{Stock: stock, Buyers: buyers, Concurrency: 48})
	if rep.Accepted != stock || rep.HTTP[http.StatusConflict] != buyers-stock {
		t.Fatalf("answers %v, want %d QUEUED and %d SOLD_OUT", rep.HTTP, stock, buyers-stock)
	}
	if rep.Orders != stock || rep.Compensated != 0 || rep.Manual != 0 {
		t.Fatalf("orders %d compensated %d manual %d, want %d/0/0", rep.Orders, rep.Compensated, rep.Manual, stock)
	}
	s := rep.Snapshot
	if s.ValidOrders != stock || s.PGAvailable != 0 || s.PGOccupied != stock || s.RedisCommitted != stock || s.RedisAvailable != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

// PostgreSQL holds fewer units than Redis admitted: the surplus reservations
// are rejected by PostgreSQL and given back to Redis exactly once each.
func TestFlashSalePGShortfallIsCompensated(t *testing.T) {
	const stock, shortfall, buyers = 20, 6, 300
	rep := run(t, e2eConfig(t), flashsale.Options{Stock: stock, PGShortfall: shortfall, Buyers: buyers, Concurrency: 48})
	if rep.Orders != stock-shortfall || rep.Compensated+int64(rep.Snapshot.RedisAvailable) < shortfall {
		t.Fatalf("orders %d compensated %d, want %d orders", rep.Orders, rep.Compensated, stock-shortfall)
	}
	s := rep.Snapshot
	if s.ValidOrders != stock-shortfall || s.PGAvailable != 0 {
		t.Fatalf("PostgreSQL oversold or left stock: %+v", s)
	}
	// Every compensation gave exactly one unit back; the freed units were
	// either bought by later buyers (more orders impossible: PG is empty) or
	// are available again in Redis.
	if s.RedisCompensated != rep.Compensated || s.RedisCommitted != stock-shortfall {
		t.Fatalf("redis compensated %d for %d compensated reservations, committed %d", s.RedisCompensated, rep.Compensated, s.RedisCommitted)
	}
}

// The SKU's Redis stock in four buckets, PostgreSQL short of what Redis
// admits: still exactly the PostgreSQL stock in orders, one per user, and
// every surplus reservation's unit given back to its own bucket once.
func TestFlashSaleInBucketsSellsExactlyAndCompensatesPerBucket(t *testing.T) {
	const stock, shortfall, buyers, buckets = 24, 4, 400, 4
	rep := run(t, e2eConfig(t), flashsale.Options{Stock: stock, PGShortfall: shortfall, Buyers: buyers, Concurrency: 48, Buckets: buckets})
	s := rep.Snapshot
	if s.Buckets != buckets || len(s.RedisBuckets) != buckets {
		t.Fatalf("snapshot has %d buckets (%d read), want %d", s.Buckets, len(s.RedisBuckets), buckets)
	}
	if rep.Orders != stock-shortfall || s.ValidOrders != stock-shortfall || s.PGAvailable != 0 {
		t.Fatalf("orders %d valid %d PostgreSQL available %d, want %d orders and none left", rep.Orders, s.ValidOrders, s.PGAvailable, stock-shortfall)
	}
	if s.RedisCompensated != rep.Compensated || s.RedisCommitted != stock-shortfall {
		t.Fatalf("redis compensated %d for %d compensated reservations, committed %d", s.RedisCompensated, rep.Compensated, s.RedisCommitted)
	}
	// Each bucket's units add up on their own, and every bucket sold: its
	// users' reservations went to it.
	for _, b := range s.RedisBuckets {
		if b.Balance() != 0 || b.Committed == 0 {
			t.Errorf("bucket %d: %+v (delta %d)", b.Bucket, b, b.Balance())
		}
	}
}

// The answer to a commit is lost three times: the sagas resolve each by the
// inbox and converge with no compensation.
func TestFlashSaleCommitOutcomeUnknownConverges(t *testing.T) {
	fp := &failpoint.Set{}
	testenv.RequireFailpoints(t)
	fp.Arm(failpoint.DuringCommitResponse, 3)
	rep := run(t, e2eConfig(t), flashsale.Options{Stock: 10, Buyers: 40, Concurrency: 16, Failpoints: fp})
	if rep.Orders != 10 || rep.Compensated != 0 || rep.Manual != 0 {
		t.Fatalf("orders %d compensated %d manual %d, want 10/0/0", rep.Orders, rep.Compensated, rep.Manual)
	}
	if err := fp.Check(failpoint.DuringCommitResponse); err != nil {
		t.Fatal("the failpoint did not fire three times")
	}
}
