package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/logx"
)

// Base is what every long-running subcommand starts from.
type Base struct {
	Cfg config.Config
	Log *slog.Logger
	Tel *app.Telemetry
}

// LoadBase loads the configuration (internal/platform/config) and makes the logger
// and the telemetry registry of one command.
func LoadBase() (Base, error) {
	cfg, err := config.Load()
	if err != nil {
		return Base{}, err
	}
	return Base{Cfg: cfg, Log: logx.New(os.Stderr, cfg.LogLevel), Tel: app.NewTelemetry()}, nil
}

// openCLI loads the configuration and connects a command to every service
// (Temporal included); the caller closes the connections.
func openCLI(ctx context.Context) (Base, *app.Conns, error) {
	b, err := LoadBase()
	if err != nil {
		return Base{}, nil, err
	}
	conns, err := app.Open(ctx, b.Cfg, "seckill-cli", true, b.Log, nil)
	return b, conns, err
}
