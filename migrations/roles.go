package migrations

// The application's role: the api, the workers and the operator commands run
// as a login role in AppRole, which may read and write the rows and run the
// functions but not change the schema; only `seckill migrate` connects as
// the owner (docs/deploy.md#database-roles).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AppRole is the group role every process but the migrator runs in.
const AppRole = "seckill_app"

// ensureAppRole creates AppRole (NOLOGIN) when it does not exist, before any
// migration runs: a migrator that may not create roles fails here, with
// the statement an administrator runs, and has changed nothing.
func ensureAppRole(ctx context.Context, db *sql.DB) error {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, AppRole).Scan(&exists); err != nil {
		return fmt.Errorf("look up role %s: %w", AppRole, err)
	}
	if exists {
		return nil
	}
	_, err := db.ExecContext(ctx, "CREATE ROLE "+pgx.Identifier{AppRole}.Sanitize()+" NOLOGIN")
	var pe *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &pe) && (pe.Code == "42710" || pe.Code == "23505"): // created, or by a concurrent migrator
		return nil
	case errors.As(err, &pe) && pe.Code == "42501":
		return fmt.Errorf("the application role %s does not exist and this role may not create it: "+
			"have an administrator run CREATE ROLE %s NOLOGIN, then migrate again (docs/deploy.md#database-roles)", AppRole, AppRole)
	default:
		return fmt.Errorf("create role %s: %w", AppRole, err)
	}
}

// grantApp gives AppRole the rows, sequences and functions of the schema
// the migrations ran in, and takes the migrations' own bookkeeping back:
// run after every migration, so a new table is covered the moment it exists.
// One transaction under an advisory lock: concurrent GRANTs on one object
// fail ("tuple concurrently updated").
func grantApp(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("grant the application role: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var schema string
	if err := tx.QueryRowContext(ctx, `SELECT current_schema() FROM pg_advisory_xact_lock(hashtext('seckill.migrations.grant_app'))`).Scan(&schema); err != nil {
		return fmt.Errorf("current schema: %w", err)
	}
	s, r := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{AppRole}.Sanitize()
	for _, stmt := range []string{
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + r,
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA " + s + " TO " + r,
		"GRANT EXECUTE ON ALL ROUTINES IN SCHEMA " + s + " TO " + r,
		"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON " + s + "." + pgx.Identifier{versionTable}.Sanitize() + " FROM " + r,
	} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("grant the application role: %s: %w", stmt, err)
		}
	}
	return tx.Commit()
}

// versionTable is goose's table of applied versions (its default name).
const versionTable = "goose_db_version"
