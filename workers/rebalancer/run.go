package rebalancer

import (
	"context"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/workers"
)

// Run rebalances the bucketed SKUs until ctx ends (part "rebalance");
// SECKILL_REBALANCE_INTERVAL=0 switches it off (it then waits for ctx).
func Run(ctx context.Context, d workers.Deps) error {
	cfg := d.Config
	if cfg.RebalanceInterval <= 0 {
		d.Log.Info("rebalance.disabled")
		<-ctx.Done()
		return nil
	}
	r, err := New(d.Redis, Options{Interval: cfg.RebalanceInterval, Grace: cfg.RebalanceGrace, TTL: cfg.ReservationTTL},
		metrics.NewRebalance(d.Registry), d.Failpoints, d.Log)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
