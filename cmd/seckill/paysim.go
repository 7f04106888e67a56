package main

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/logx"
	"github.com/seckill/seckill/paysim"
)

// Development defaults of the payment provider simulator, like the defaults in
// internal/config: good on a developer machine, never anywhere else.
const (
	defaultPaysimAddr = "127.0.0.1:18090"
	// hex("dev-only-paysim-secret-change-me"), 32 bytes.
	defaultPaysimSecret      = "6465762d6f6e6c792d70617973696d2d7365637265742d6368616e67652d6d65"
	defaultPaysimMerchantKey = "dev-merchant-key"
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
			secret, err := hex.DecodeString(paysimEnv("SECKILL_PAYSIM_SECRET", defaultPaysimSecret))
			if err != nil || len(secret) < 32 {
				return fmt.Errorf("SECKILL_PAYSIM_SECRET: must be hex of at least 32 bytes")
			}
			key := paysimEnv("SECKILL_PAYSIM_MERCHANT_KEY", defaultPaysimMerchantKey)
			log := logx.New(os.Stderr, paysimEnv("SECKILL_LOG_LEVEL", "info")).With("service", "paysim")
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
	cmd.Flags().StringVar(&addr, "addr", paysimEnv("SECKILL_PAYSIM_ADDR", defaultPaysimAddr), "listen address (env SECKILL_PAYSIM_ADDR)")
	cmd.Flags().IntVar(&attempts, "max-callback-attempts", 12, "attempts per callback delivery before giving up")
	cmd.Flags().DurationVar(&backoff, "callback-backoff", 200*time.Millisecond, "wait after the first failed callback attempt (doubles)")
	cmd.Flags().DurationVar(&maxBackoff, "max-callback-backoff", 10*time.Second, "cap of the callback backoff")
	cmd.Flags().DurationVar(&cbTimeout, "callback-timeout", 5*time.Second, "timeout of one callback attempt")
	return cmd
}

func paysimEnv(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
