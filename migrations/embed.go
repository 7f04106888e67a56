// Package migrations holds the numbered SQL migrations of the seckill
// database and applies them with goose (embedded, so the binary carries them).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS is the embedded set of SQL migration files.
//
//go:embed *.sql
var FS embed.FS

// Result is one applied migration.
type Result struct {
	Version int64
	Source  string
}

// Up applies every pending migration to the database at dsn and returns what
// it applied (empty when the schema was already current), then grants the
// application role (AppRole) what it needs and no more. A PostgreSQL
// advisory lock serialises concurrent migrators.
func Up(ctx context.Context, dsn string) ([]Result, error) {
	p, db, err := provider(dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := ensureAppRole(ctx, db); err != nil {
		return nil, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	if err := grantApp(ctx, db); err != nil {
		return nil, err
	}
	out := make([]Result, 0, len(res))
	for _, r := range res {
		out = append(out, Result{Version: r.Source.Version, Source: r.Source.Path})
	}
	return out, nil
}

// Version returns the schema version currently applied.
func Version(ctx context.Context, dsn string) (int64, error) {
	p, db, err := provider(dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return p.GetDBVersion(ctx)
}

func provider(dsn string) (*goose.Provider, *sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, db, nil
}
