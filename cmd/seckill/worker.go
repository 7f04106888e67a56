package main

import (
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/redisx"
	"github.com/seckill/seckill/workers/senddue"
)

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the background workers: the send-due scanner (metrics on SECKILL_METRICS_ADDR)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBase()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			rdb, err := redisx.Open(ctx, b.cfg.RedisAddr, b.cfg.RedisPoolSize)
			if err != nil {
				return err
			}
			defer rdb.Close()
			prod, err := mq.NewProducer(b.cfg.RocketMQNameServers, "seckill-senddue", mq.WithSendTimeout(b.cfg.MQSendTimeout))
			if err != nil {
				return err
			}
			defer prod.Close()
			scan, err := senddue.New(rdb, prod, senddue.Options{Topic: b.cfg.TopicOrderCreate, Lease: b.cfg.SendLease,
				SendTimeout: b.cfg.MQSendTimeout, MaxAttempts: b.cfg.SendMaxAttempts, Interval: 200 * time.Millisecond},
				metrics.NewReservation(b.reg), b.log)
			if err != nil {
				return err
			}
			g, gctx := errgroup.WithContext(ctx)
			g.Go(func() error { return scan.Run(gctx) })
			serveHTTP(gctx, g, api.Server(b.cfg.MetricsAddr, metrics.Handler(b.reg)), b.log, "metrics")
			return g.Wait()
		},
	}
}
