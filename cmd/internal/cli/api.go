package cli

import (
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
)

func newAPICmd() *cobra.Command {
	return &cobra.Command{
		Use:   "api",
		Short: "Run the HTTP gateway (SECKILL_HTTP_ADDR): reservations, orders, payments, callbacks, admin sale set-up, /metrics",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			conns, err := app.Open(cmd.Context(), b.Cfg, "seckill-gateway", true, b.Log, b.Tel)
			if err != nil {
				return err
			}
			defer conns.Close()
			fp, err := failpoint.FromEnv()
			if err != nil {
				return err
			}
			h, err := app.APIHandler(b.Cfg, conns, b.Tel, fp, b.Log)
			if err != nil {
				return err
			}
			// /metrics on its own listener, never on the public one.
			g, gctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return app.ServeHTTP(gctx, api.Server(b.Cfg.HTTPAddr, h), b.Log, "api") })
			g.Go(func() error {
				return app.ServeHTTP(gctx, api.Server(app.MetricsAddr(b.Cfg, nil), metrics.Handler(b.Tel.Registry)), b.Log, "metrics")
			})
			return g.Wait()
		},
	}
}
