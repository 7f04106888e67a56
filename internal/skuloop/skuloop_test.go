package skuloop

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/metrics"
)

func TestPassCountsLogsAndNamesEveryFailedSKU(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewSKUFailures(reg, "senddue")
	var log strings.Builder
	p := NewPass("senddue", m, slog.New(slog.NewTextHandler(&log, nil)))
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
