package skuloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/metrics"
)

func TestPassCountsLogsAndNamesEveryFailedSKU(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewSKUFailures(reg, "senddue")
	var log strings.Builder
	p := NewPass("senddue", m, slog.New(slog.NewTextHandler(&log, nil)), redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	if p.Err() != nil {
		t.Fatalf("a pass without failures: %v", p.Err())
	}
	boom := errors.New("WRONGTYPE")
	p.Fail(7, 1, 0, boom)
	p.Fail(7, 2, 3, fmt.Errorf("claim: %w", boom))
	err := p.Err()
	if !Only(err) || !errors.Is(err, boom) {
		t.Fatalf("pass error %v: Only %v, Is %v", err, Only(err), errors.Is(err, boom))
	}
	if want := "senddue: 2 SKUs failed: sku 7:1: WRONGTYPE; sku 7:2 bucket 3: claim: WRONGTYPE"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if p.Unreachable(context.Background(), "seckill:{7:3}:send_due") != nil {
		t.Fatal("a Redis reply (WRONGTYPE) marked the node unreachable")
	}
	if Only(errors.Join(err, errors.New("list active skus"))) || Only(boom) || Only(nil) {
		t.Fatal("Only is true for an error that is not SKU failures alone")
	}
	if n := strings.Count(log.String(), "msg=loop.sku_failed"); n != 2 {
		t.Fatalf("%d log lines, want one per failed SKU:\n%s", n, log.String())
	}
	if got := testutil.ToFloat64(m.Counter(7, 2)); got != 1 {
		t.Fatalf("counted %v for 7:2, want 1", got)
	}
	// A second loop on the same registry shares the metric by its loop label.
	other := metrics.NewSKUFailures(reg, "reconcile")
	other.Inc(7, 2)
	if got := testutil.ToFloat64(m.Counter(7, 2)); got != 1 {
		t.Fatalf("the reconcile loop's failure counted under senddue: %v", got)
	}
}

func TestSKUFailureSeriesAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewSKUFailures(reg, "rebalance")
	for s := range int64(metrics.MaxSKUFailureSeries + 5) {
		m.Inc(1, s)
	}
	m.Inc(1, 0) // a SKU with a series of its own keeps it
	if n := testutil.CollectAndCount(reg, "seckill_loop_sku_failures_total"); n != metrics.MaxSKUFailureSeries+1 {
		t.Fatalf("%d series, want %d and one for the rest", n, metrics.MaxSKUFailureSeries+1)
	}
	if got := testutil.ToFloat64(m.Counter(1, 0)); got != 2 {
		t.Fatalf("1:0 counted %v, want 2", got)
	}
}

// A node found unreachable by one SKU of a pass is not tried again by the
// pass's later SKUs on it: they fail at once, counted and logged; a new pass
// tries it again.
func TestUnreachableNodeIsTriedOncePerPass(t *testing.T) {
	ctx := context.Background()
	dials := 0
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, // nothing listens on port 1
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials++
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	defer rdb.Close()
	m := metrics.NewSKUFailures(prometheus.NewRegistry(), "senddue")
	p := NewPass("senddue", m, slog.New(slog.DiscardHandler), rdb)
	if err := p.Unreachable(ctx, "seckill:{7:1}:send_due"); err != nil {
		t.Fatalf("before any failure: %v", err)
	}
	err := rdb.ZCard(ctx, "seckill:{7:1}:send_due").Err()
	var oe *net.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("the first SKU's command: %v (%T), want a connection error", err, err)
	}
	p.Fail(7, 1, 0, err)
	tried := dials
	for s := int64(2); s <= 4; s++ {
		err := p.Unreachable(ctx, fmt.Sprintf("seckill:{7:%d}:send_due", s))
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), "127.0.0.1:1 was unreachable earlier in this pass") {
			t.Fatalf("SKU 7:%d after the node failed: %v", s, err)
		}
		p.Fail(7, s, 0, err)
	}
	if dials != tried {
		t.Fatalf("the later SKUs dialled the unreachable node %d more times", dials-tried)
	}
	if got := testutil.ToFloat64(m.Counter(7, 4)); got != 1 {
		t.Fatalf("the skipped SKU 7:4 counted %v, want 1", got)
	}
	if e := (&Error{}); !errors.As(p.Err(), &e) || len(e.Failures) != 4 {
		t.Fatalf("pass error %v, want 4 failures", p.Err())
	}
	if NewPass("senddue", m, slog.New(slog.DiscardHandler), rdb).Unreachable(ctx, "seckill:{7:2}:send_due") != nil {
		t.Fatal("a new pass did not try the node again")
	}
}
