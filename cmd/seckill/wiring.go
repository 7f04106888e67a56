package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/logx"
	"github.com/seckill/seckill/internal/metrics"
)

// base is what every long-running subcommand starts from.
type base struct {
	cfg config.Config
	log *slog.Logger
	reg *prometheus.Registry
}

func loadBase() (base, error) {
	cfg, err := config.Load()
	if err != nil {
		return base{}, err
	}
	return base{cfg: cfg, log: logx.New(os.Stderr, cfg.LogLevel), reg: metrics.NewRegistry()}, nil
}

func (b base) deriver() (*ids.Deriver, error) {
	keys, err := b.cfg.IDKeys()
	if err != nil {
		return nil, err
	}
	return ids.NewDeriver(keys, b.cfg.IDKeyVersion)
}

func (b base) authenticator() (*auth.Authenticator, error) {
	secret, err := hex.DecodeString(b.cfg.AuthSecret)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_AUTH_SECRET: %w", err)
	}
	return auth.New(secret, b.cfg.AdminToken)
}

// serveHTTP runs srv until ctx ends, then shuts it down gracefully.
func serveHTTP(ctx context.Context, g *errgroup.Group, srv *http.Server, log *slog.Logger, what string) {
	g.Go(func() error {
		log.Info("http.listening", "what", what, "addr", srv.Addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s on %s: %w", what, srv.Addr, err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}
