package main

import (
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/pg"
	"github.com/seckill/seckill/internal/redisx"
	"github.com/seckill/seckill/internal/reservation"
)

func newAPICmd() *cobra.Command {
	return &cobra.Command{
		Use:   "api",
		Short: "Run the HTTP gateway (SECKILL_HTTP_ADDR): reservations, status, admin sale set-up, /metrics",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBase()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
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
			prod, err := mq.NewProducer(b.cfg.RocketMQNameServers, "seckill-gateway", mq.WithSendTimeout(b.cfg.MQSendTimeout))
			if err != nil {
				return err
			}
			defer prod.Close()
			d, err := b.deriver()
			if err != nil {
				return err
			}
			authn, err := b.authenticator()
			if err != nil {
				return err
			}
			fp, err := failpoint.FromEnv()
			if err != nil {
				return err
			}
			res, err := reservation.NewReserver(rdb, d, prod, reservation.Options{
				Topic: b.cfg.TopicOrderCreate, SendTimeout: b.cfg.MQSendTimeout, SendDueDelay: b.cfg.SendDueDelay,
				ReservationTTL: b.cfg.ReservationTTL, MaxAttempts: b.cfg.SendMaxAttempts, SoldOutMemo: b.cfg.SoldOutMemo,
			}, metrics.NewReservation(b.reg), fp, b.log)
			if err != nil {
				return err
			}
			h := api.NewRouter(api.Deps{Auth: authn, Reserver: res, Status: reservation.NewStatusReader(rdb, pool),
				Pool: pool, Redis: rdb, Metrics: metrics.Handler(b.reg), Log: b.log})
			g, gctx := errgroup.WithContext(ctx)
			serveHTTP(gctx, g, api.Server(b.cfg.HTTPAddr, h), b.log, "api")
			return g.Wait()
		},
	}
}
