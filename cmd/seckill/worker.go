package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/pg"
	"github.com/seckill/seckill/internal/redisx"
	"github.com/seckill/seckill/internal/temporalx"
	"github.com/seckill/seckill/workers/outboxrelay"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workers/sagaworker"
	"github.com/seckill/seckill/workers/senddue"
)

// workerParts are the loops `seckill worker` can run.
var workerParts = []string{"senddue", "starter", "saga", "outbox"}

func newWorkerCmd() *cobra.Command {
	var only string
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the background workers: send-due scanner, saga starter, Temporal saga worker, outbox relay",
		Long: `Runs, in one process, every long-running loop after the gateway:
  senddue  re-sends ORDER_CREATE_REQUESTED the gateway could not confirm (Redis lease claims)
  starter  RocketMQ consumer that starts one ReservationSaga per reservation
  saga     Temporal worker executing ReservationSaga and its activities
  outbox   relays event_outbox rows to RocketMQ
Metrics are served on SECKILL_METRICS_ADDR/metrics.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			parts := workerParts
			if only != "" {
				parts = strings.Split(only, ",")
				for _, p := range parts {
					if !slices.Contains(workerParts, p) {
						return fmt.Errorf("--only: unknown part %q (want some of %s)", p, strings.Join(workerParts, ","))
					}
				}
			}
			return runWorker(cmd.Context(), parts)
		},
	}
	cmd.Flags().StringVar(&only, "only", "", "comma-separated subset of "+strings.Join(workerParts, ","))
	return cmd
}

func runWorker(ctx context.Context, parts []string) error {
	b, err := loadBase()
	if err != nil {
		return err
	}
	pool, err := pg.Open(ctx, b.cfg.PostgresDSN, b.cfg.PGMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := redisx.Open(ctx, b.cfg.RedisAddr, b.cfg.RedisPoolSize)
	if err != nil {
		return err
	}
	defer rdb.Close()
	prod, err := mq.NewProducer(b.cfg.RocketMQNameServers, "seckill-worker", mq.WithSendTimeout(b.cfg.MQSendTimeout))
	if err != nil {
		return err
	}
	defer prod.Close()
	g, gctx := errgroup.WithContext(ctx)
	run := func(p string) bool { return slices.Contains(parts, p) }

	if run("senddue") {
		scan, err := senddue.New(rdb, prod, senddue.Options{Topic: b.cfg.TopicOrderCreate, Lease: b.cfg.SendLease,
			SendTimeout: b.cfg.MQSendTimeout, MaxAttempts: b.cfg.SendMaxAttempts, Interval: 200 * time.Millisecond},
			metrics.NewReservation(b.reg), b.log)
		if err != nil {
			return err
		}
		g.Go(func() error { return scan.Run(gctx) })
	}
	if run("outbox") {
		relay, err := outboxrelay.New(pool, prod, outboxrelay.Options{Topic: b.cfg.TopicEvents, SendTimeout: b.cfg.MQSendTimeout}, b.reg, b.log)
		if err != nil {
			return err
		}
		g.Go(func() error { return relay.Run(gctx) })
	}
	if run("starter") || run("saga") {
		tc, err := temporalx.Dial(ctx, b.cfg.TemporalAddress, b.cfg.TemporalNamespace, b.log)
		if err != nil {
			return err
		}
		defer tc.Close()
		if run("saga") {
			verify, err := pg.Open(ctx, b.cfg.PostgresDSN, 2)
			if err != nil {
				return err
			}
			defer verify.Close()
			fp, err := failpoint.FromEnv()
			if err != nil {
				return err
			}
			acts, err := activities.New(pool, verify, rdb, fp, b.log, b.cfg.TopicOrderCreate, b.cfg.ReservationTTL)
			if err != nil {
				return err
			}
			w := sagaworker.New(tc, b.cfg.TemporalTaskQueue, acts, int(b.cfg.PGMaxConns))
			if err := w.Start(); err != nil {
				return fmt.Errorf("start temporal worker: %w", err)
			}
			defer w.Stop()
		}
		if run("starter") {
			st, err := sagastarter.New(pool, tc, b.cfg.TemporalTaskQueue, b.reg, b.log)
			if err != nil {
				return err
			}
			cons, err := mq.NewConsumer(b.cfg.RocketMQNameServers, sagastarter.ConsumerGroup, b.cfg.TopicOrderCreate, st.Handle,
				mq.ConsumerOptions{Concurrency: b.cfg.ConsumerConcurrency})
			if err != nil {
				return err
			}
			if err := cons.Start(); err != nil {
				return err
			}
			defer cons.Close()
		}
	}
	serveHTTP(gctx, g, api.Server(b.cfg.MetricsAddr, metrics.Handler(b.reg)), b.log, "metrics")
	b.log.Info("worker.started", "parts", strings.Join(parts, ","))
	return g.Wait()
}
