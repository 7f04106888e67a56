package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/logx"
)

// base is what every long-running subcommand starts from.
type base struct {
	cfg config.Config
	log *slog.Logger
	tel *app.Telemetry
}

func loadBase() (base, error) {
	cfg, err := config.Load()
	if err != nil {
		return base{}, err
	}
	return base{cfg: cfg, log: logx.New(os.Stderr, cfg.LogLevel), tel: app.NewTelemetry()}, nil
}

// openCLI loads the configuration and connects a command to every service
// (Temporal included); the caller closes the connections.
func openCLI(ctx context.Context) (base, *app.Conns, error) {
	b, err := loadBase()
	if err != nil {
		return base{}, nil, err
	}
	conns, err := app.Open(ctx, b.cfg, "seckill-cli", true, b.log, nil)
	return b, conns, err
}

func (b base) deriver() (*ids.Deriver, error) { return app.Deriver(b.cfg) }

func (b base) authenticator() (*auth.Authenticator, error) { return app.Authenticator(b.cfg) }
