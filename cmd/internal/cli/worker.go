package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/workers/reconciler"
)

func newWorkerCmd() *cobra.Command {
	var only string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the background workers: send-due scanner, saga starter, Temporal saga worker, outbox relay",
		Long: `Runs, in one process, every long-running loop after the gateway:
  senddue  re-sends ORDER_CREATE_REQUESTED the gateway could not confirm (Redis lease claims)
  rebalance  moves stock between the buckets of hot SKUs (one process at a time, by a Redis lease)
  starter  RocketMQ consumer that starts one ReservationSaga per reservation
  saga     Temporal worker executing ReservationSaga and its activities
  outbox   relays event_outbox rows to RocketMQ
  deadletter  copies messages the broker dead-lettered (%DLQ%<starter group>) into message_quarantine
  refunds  starts the refunds of payments that landed on cancelled orders, until each is done
With the saga part it also makes sure the reconciliation Schedule exists.
Metrics are served on SECKILL_METRICS_ADDR/metrics, GET /healthz there for probes.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts := app.AllParts
			if only != "" {
				parts = strings.Split(only, ",")
				for _, p := range parts {
					if !slices.Contains(app.AllParts, p) {
						return fmt.Errorf("--only: unknown part %q (want some of %s)", p, strings.Join(app.AllParts, ","))
					}
				}
			}
			b, err := LoadBase()
			if err != nil {
				return err
			}
			needTemporal := app.NeedsTemporal(parts)
			conns, err := app.Open(cmd.Context(), b.Cfg, "seckill-worker", needTemporal, b.Log, b.Tel)
			if err != nil {
				return err
			}
			defer conns.Close()
			fp, err := failpoint.FromEnv()
			if err != nil {
				return err
			}
			if slices.Contains(parts, app.PartSaga) && b.Cfg.ReconcileSchedule {
				if err := reconciler.EnsureSchedule(cmd.Context(), conns.Temporal, b.Cfg.TemporalTaskQueue, b.Cfg.ReconcileEvery); err != nil {
					return err
				}
			}
			g, gctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return app.RunWorkers(gctx, b.Cfg, conns, parts, b.Tel, fp, b.Log) })
			g.Go(func() error {
				return app.ServeHTTP(gctx, api.Server(app.MetricsAddr(b.Cfg, parts), app.WorkerHandler(metrics.Handler(b.Tel.Registry))), b.Log, "metrics")
			})
			return g.Wait()
		},
	}
	cmd.Flags().StringVar(&only, "only", "", "comma-separated subset of "+strings.Join(app.AllParts, ","))
	return cmd
}
