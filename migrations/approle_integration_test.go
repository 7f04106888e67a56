package migrations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

// TestTheAppRoleWritesRowsButNotTheSchema: after `migrate up` the
// application's role (the stack's seckill_app login) may read and write
// every table but the migrations' own, use every sequence and run every
// function, and may not create, alter, drop or truncate anything; the
// production check refuses the owner and accepts the app role.
func TestTheAppRoleWritesRowsButNotTheSchema(t *testing.T) {
	cfg := testenv.Require(t)
	ctx := context.Background()
	dsn, owner := testenv.Database(t, cfg)
	app, err := pg.Open(ctx, config.StackAppDSN(dsn), 2)
	if err != nil {
		t.Fatalf("log in as %s (scripts/stack.sh creates it: make up): %v", migrations.AppRole, err)
	}
	defer app.Close()

	var oe *pg.OwnerError
	if err := pg.RefuseOwner(ctx, owner); !errors.As(err, &oe) || oe.OwnedTables == 0 {
		t.Fatalf("RefuseOwner(owner) = %v, want an OwnerError naming its tables", err)
	}
	if err := pg.RefuseOwner(ctx, app); err != nil {
		t.Fatalf("RefuseOwner(app role) = %v, want nil", err)
	}

	var missing []string
	rows, err := owner.Query(ctx, `
		SELECT c.relname FROM pg_class c
		 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
		   AND NOT has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE')
		UNION ALL
		SELECT c.relname FROM pg_class c
		 WHERE c.relnamespace = current_schema()::regnamespace
		   AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege($1, c.oid, 'USAGE, SELECT, UPDATE') ELSE false END
		UNION ALL
		SELECT p.proname FROM pg_proc p
		 WHERE p.pronamespace = current_schema()::regnamespace AND NOT has_function_privilege($1, p.oid, 'EXECUTE')`,
		migrations.AppRole)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		missing = append(missing, n)
	}
	if rows.Err() != nil || len(missing) > 0 {
		t.Fatalf("%s lacks privileges on %v (%v)", migrations.AppRole, missing, rows.Err())
	}
	var tables int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')`).Scan(&tables); err != nil || tables < 10 {
		t.Fatalf("%d tables, %v: the check above saw no schema", tables, err)
	}

	// A row written and read back as the app role.
	if _, err := app.Exec(ctx, `INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES (1, 'role probe', now(), now() + interval '1 hour', 60, 60)`); err != nil {
		t.Fatalf("insert as the app role: %v", err)
	}
	for _, stmt := range []string{
		`CREATE TABLE probe (id int)`,
		`ALTER TABLE sale_activity ADD COLUMN probe int`,
		`DROP TABLE event_outbox`,
		`TRUNCATE sale_activity`,
		`CREATE INDEX probe_idx ON orders (created_at)`,
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`,
		`DELETE FROM goose_db_version`,
		`CREATE OR REPLACE FUNCTION probe() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
	} {
		_, err := app.Exec(ctx, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s as the app role: %v, want a privilege error (42501)", stmt, err)
		}
	}
	var n int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM sale_activity WHERE activity_id = 1`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the probe row: %d, %v; want it kept", n, err)
	}
}
