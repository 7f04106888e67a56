package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Rebalance holds the metrics of the bucket rebalancer (workers/rebalancer).
type Rebalance struct {
	// Transfers counts planned transfers by result: done (taken, given and
	// closed), short (the giver had less than planned: nothing moved),
	// failed (stopped after the take, or before it with its outcome
	// unknown: recovery finishes it).
	Transfers *prometheus.CounterVec // seckill_rebalance_transfers_total{result}
	// UnitsMoved counts units given to a receiving bucket (moves and recoveries).
	UnitsMoved prometheus.Counter // seckill_rebalance_units_moved_total
	// Recovered counts SENT transfers past the grace finished by recovery.
	Recovered prometheus.Counter // seckill_rebalance_recovered_total
	// InFlight is Σ xfer_out − Σ xfer_in over every bucketed SKU at the last tick.
	InFlight prometheus.Gauge // seckill_rebalance_in_flight_units
	// LeaseHeld is 1 while this process holds the rebalancer lease.
	LeaseHeld prometheus.Gauge // seckill_rebalance_lease_held
	// SKUFailures: ticks that failed on a SKU.
	SKUFailures *SKUFailures // seckill_loop_sku_failures_total{loop="rebalance"}
}

// NewRebalance registers the rebalancer metrics on reg.
func NewRebalance(reg prometheus.Registerer) *Rebalance {
	f := promauto.With(reg)
	return &Rebalance{
		Transfers: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_rebalance_transfers_total",
			Help: "Stock transfers between a SKU's buckets started by the rebalancer, by result (done, short, failed)."},
			[]string{"result"}),
		UnitsMoved: f.NewCounter(prometheus.CounterOpts{Name: "seckill_rebalance_units_moved_total",
			Help: "Stock units given to a receiving bucket by the rebalancer (moves and recoveries)."}),
		Recovered: f.NewCounter(prometheus.CounterOpts{Name: "seckill_rebalance_recovered_total",
			Help: "Transfers left SENT past the grace (a crash or an error) that the rebalancer finished."}),
		InFlight: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_rebalance_in_flight_units",
			Help: "Units taken from a bucket and not yet given to their target, over every bucketed SKU, at the last tick."}),
		LeaseHeld: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_rebalance_lease_held",
			Help: "1 while this process holds the rebalancer lease."}),
		SKUFailures: NewSKUFailures(reg, "rebalance"),
	}
}
