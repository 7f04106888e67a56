package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/migrations"
)

func TestMigrationsApplyOnceAndConstraintsHold(t *testing.T) {
	cfg := testenv.Require(t)
	ctx := context.Background()
	dsn, pool := testenv.Database(t, cfg) // applied up from empty

	v, err := migrations.Version(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if v < 1 {
		t.Fatalf("schema version after up = %d, want >= 1", v)
	}

	again, err := migrations.Up(ctx, dsn)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second apply changed %d migrations, want none", len(again))
	}

	for _, table := range []string{"sale_activity", "sku_inventory", "orders", "inventory_reservation",
		"consumer_inbox", "event_outbox", "compensation_task", "payment_record", "inventory_ledger", "repair_task"} {
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass('public.' || $1) IS NOT NULL`, table).Scan(&ok); err != nil || !ok {
			t.Errorf("table %s missing (err %v)", table, err)
		}
	}

	if _, err := pool.Exec(ctx, `INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES (1, 'a', now(), now() + interval '1 hour', 900, 300)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                        string
		initial, avail, occ, sold   int64
		wantConstraintPrefixOrExact string
	}{
		{"negative available", 1, -1, 2, 0, "sku_inventory_available_stock_check"},
		{"negative occupied", 1, 2, -1, 0, "sku_inventory_occupied_stock_check"},
		{"negative sold", 1, 2, 0, -1, "sku_inventory_sold_stock_check"},
		{"not conserved", 10, 5, 1, 1, "sku_inventory_conservation"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock, occupied_stock, sold_stock)
				VALUES (1, $1, $2, $3, $4, $5)`, i+1, c.initial, c.avail, c.occ, c.sold)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != c.wantConstraintPrefixOrExact {
				t.Fatalf("insert = %v, want check violation of %s", err, c.wantConstraintPrefixOrExact)
			}
		})
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sku_inventory`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after rejected inserts = %d (err %v), want 0", n, err)
	}
	// A conserved row is accepted, and an update that would go negative is refused.
	if _, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, initial_stock, available_stock) VALUES (1, 99, 1, 1)`); err != nil {
		t.Fatalf("valid row: %v", err)
	}
	_, err = pool.Exec(ctx, `UPDATE sku_inventory SET available_stock = available_stock - 2, occupied_stock = occupied_stock + 2 WHERE sku_id = 99`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("update to negative = %v, want check violation", err)
	}
}

// 00012 replaces the order function of 00007 by one without the failpoint
// parameter and without failpoint code, on top of a database at version 10
// (with the old function in it) as from empty, and its Down restores the old
// one. The migrations install no failpoint hook of any kind: only a build
// with -tags failpoints does, from internal/orders/failpoints.sql.
func TestCreateOrderFunctionCarriesNoFailpoint(t *testing.T) {
	cfg := testenv.Require(t)
	ctx := context.Background()
	dsn, pool := testenv.Database(t, cfg)
	// check: the function of wantArgs parameters exists; with 18 (from
	// 00012 on) no seckill_create_order body carries failpoint code (the
	// 19-parameter signature stays as a plain forwarder for a rolling
	// deploy); with 19 (00007) the one function carries them.
	check := func(wantArgs int) {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT pronargs, prosrc FROM pg_proc WHERE proname = 'seckill_create_order'`)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		var n int
		for rows.Next() {
			var args int
			var src string
			if err := rows.Scan(&args, &src); err != nil {
				t.Fatal(err)
			}
			n++
			found = found || args == wantArgs
			if hooked := strings.Contains(strings.ToLower(src), "fail") || strings.Contains(src, "SK001"); hooked != (wantArgs == 19) {
				t.Fatalf("seckill_create_order with %d parameters: failpoint code in its body = %v", args, hooked)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if !found || (wantArgs == 19 && n != 1) {
			t.Fatalf("seckill_create_order: %d functions, none or more than the one of %d parameters", n, wantArgs)
		}
	}
	noHooks := func() {
		t.Helper()
		var triggers, fns int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'seckill_failpoint%'),
			(SELECT count(*) FROM pg_proc WHERE proname LIKE 'seckill_%failpoint%')`).Scan(&triggers, &fns); err != nil {
			t.Fatal(err)
		}
		if triggers != 0 || fns != 0 {
			t.Fatalf("the migrations installed %d failpoint triggers and %d failpoint functions", triggers, fns)
		}
	}
	check(18)
	noHooks()
	if err := migrations.DownTo(ctx, dsn, 10); err != nil {
		t.Fatal(err)
	}
	check(19)
	if _, err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("up from version 10: %v", err)
	}
	check(18)
	noHooks()
}
