package main

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/app"
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

func (b base) deriver() (*ids.Deriver, error) { return app.Deriver(b.cfg) }

func (b base) authenticator() (*auth.Authenticator, error) { return app.Authenticator(b.cfg) }
