// Package pg opens the PostgreSQL pool every seckill process shares.
package pg

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open connects a pool to dsn with at most maxConns connections and checks
// that the server answers.
func Open(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	cfg.MaxConns = maxConns
	cfg.MaxConnIdleTime = 5 * time.Minute
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping postgres at %s: %w", hosts(cfg.ConnConfig), err)
	}
	return pool, nil
}

// hosts is every host:port of a (multi-host) DSN, as tried.
func hosts(c *pgx.ConnConfig) string {
	out := []string{net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))}
	for _, f := range c.Fallbacks {
		out = append(out, net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))))
	}
	return strings.Join(slices.Compact(out), ",")
}
