package metrics

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxSKUFailureSeries bounds the (activity_id, sku_id) pairs one loop of
// one process gives series of their own; failures of further SKUs are
// counted under activity_id="other", sku_id="other" (their log lines still
// name them).
const MaxSKUFailureSeries = 100

// SKUFailures counts, per SKU, the passes of one worker loop (senddue,
// rebalance, reconcile) that failed on that SKU and went on with the next
// (internal/platform/skuloop). The one exception to "IDs never go to labels": a
// series exists only for a SKU that failed, at most MaxSKUFailureSeries per
// loop and process, so an operator sees which SKU (and so which Redis
// shard) is failing.
type SKUFailures struct {
	vec  *prometheus.CounterVec // seckill_loop_sku_failures_total{loop,activity_id,sku_id}
	loop string

	mu   sync.Mutex
	seen map[[2]int64]bool
}

// NewSKUFailures registers seckill_loop_sku_failures_total on reg (or reuses
// the one a loop registered there before) and returns loop's face of it.
func NewSKUFailures(reg prometheus.Registerer, loop string) *SKUFailures {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seckill_loop_sku_failures_total",
		Help: "Passes of a worker loop (senddue, rebalance, reconcile) that failed on a SKU and went on with the next, per SKU."},
		[]string{"loop", "activity_id", "sku_id"})
	if err := reg.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		vec = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return &SKUFailures{vec: vec, loop: loop, seen: map[[2]int64]bool{}}
}

// Inc counts one failed pass over (activityID, skuID).
func (f *SKUFailures) Inc(activityID, skuID int64) {
	a, s := strconv.FormatInt(activityID, 10), strconv.FormatInt(skuID, 10)
	key := [2]int64{activityID, skuID}
	f.mu.Lock()
	if !f.seen[key] {
		if len(f.seen) >= MaxSKUFailureSeries {
			a, s = "other", "other"
		} else {
			f.seen[key] = true
		}
	}
	f.mu.Unlock()
	f.vec.WithLabelValues(f.loop, a, s).Inc()
}

// Counter is the series of (activityID, skuID), for tests.
func (f *SKUFailures) Counter(activityID, skuID int64) prometheus.Counter {
	return f.vec.WithLabelValues(f.loop, strconv.FormatInt(activityID, 10), strconv.FormatInt(skuID, 10))
}
