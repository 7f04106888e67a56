package main

import (
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/cmd/internal/cli"
	"github.com/seckill/seckill/paysim"
)

func newPaysimCmd() *cobra.Command {
	var (
		addr       string
		attempts   int
		backoff    time.Duration
		maxBackoff time.Duration
		cbTimeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "paysim",
		Short: "Run the payment provider simulator (SECKILL_PAYSIM_ADDR): payments, close, refund, signed callbacks",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := cli.LoadBase() // SECKILL_PAYSIM_SECRET, _MERCHANT_KEY, _ADDR: internal/platform/config
			if err != nil {
				return err
			}
			secret, key := b.Cfg.PaysimSecretBytes(), b.Cfg.PaysimMerchantKey
			if addr == "" {
				addr = b.Cfg.PaysimAddr
			}
			log := b.Log.With("service", "paysim")
			sim, err := paysim.New(paysim.Options{
				Secret:              secret,
				MerchantKey:         key,
				Logger:              log,
				MaxCallbackAttempts: attempts,
				CallbackBackoff:     backoff,
				MaxCallbackBackoff:  maxBackoff,
				CallbackTimeout:     cbTimeout,
			})
			if err != nil {
				return err
			}
			defer sim.Close() // after the HTTP server has shut down: stop callbacks
			srv := &http.Server{Addr: addr, Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 16 << 10}
			return app.ServeHTTP(cmd.Context(), srv, log, "paysim")
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (default SECKILL_PAYSIM_ADDR, 127.0.0.1:18090)")
	cmd.Flags().IntVar(&attempts, "max-callback-attempts", 12, "attempts per callback delivery before giving up")
	cmd.Flags().DurationVar(&backoff, "callback-backoff", 200*time.Millisecond, "wait after the first failed callback attempt (doubles)")
	cmd.Flags().DurationVar(&maxBackoff, "max-callback-backoff", 10*time.Second, "cap of the callback backoff")
	cmd.Flags().DurationVar(&cbTimeout, "callback-timeout", 5*time.Second, "timeout of one callback attempt")
	return cmd
}
