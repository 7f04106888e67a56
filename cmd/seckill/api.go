package main

import (
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/metrics"
)

func newAPICmd() *cobra.Command {
	return &cobra.Command{
		Use:   "api",
		Short: "Run the HTTP gateway (SECKILL_HTTP_ADDR): reservations, orders, payments, callbacks, admin sale set-up, /metrics",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := loadBase()
			if err != nil {
				return err
			}
			conns, err := app.Open(cmd.Context(), b.cfg, "seckill-gateway", true, b.log, b.tel)
			if err != nil {
				return err
			}
			defer conns.Close()
			fp, err := failpoint.FromEnv()
			if err != nil {
				return err
			}
			h, err := app.APIHandler(b.cfg, conns, b.tel, fp, b.log)
			if err != nil {
				return err
			}
			// /metrics on its own listener, never on the public one.
			g, gctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return app.ServeHTTP(gctx, api.Server(b.cfg.HTTPAddr, h), b.log, "api") })
			g.Go(func() error {
				return app.ServeHTTP(gctx, api.Server(b.cfg.MetricsAddr, metrics.Handler(b.tel.Registry)), b.log, "metrics")
			})
			return g.Wait()
		},
	}
}
