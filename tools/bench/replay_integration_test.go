package bench

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/testenv"
)

// recordedCreateOrder records one real orders.Store.Create on a fresh
// database with a sale of one SKU (1000 units).
func recordedCreateOrder(t *testing.T) (Recording, string, *pgxpool.Pool) {
	t.Helper()
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	activity, sku := testenv.ActivityID(), int64(1)
	if _, err := pool.Exec(ctx, `
		INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES ($1, 'replay test', clock_timestamp() - interval '1 minute', clock_timestamp() + interval '3 hours', 900, 10800)`,
		activity); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock)
		VALUES ($1, $2, $3, 1000, 1000)`, activity, sku, orderPrice); err != nil {
		t.Fatal(err)
	}
	rec, err := RecordCreateOrder(ctx, dsn, activity, sku, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return rec, dsn, pool
}

// The replay is CreateOrder's one statement: the call of the order
// transaction, seckill_create_order, in autocommit, with the script's own
// ids and user.
func TestReplayScriptMirrorsCreateOrder(t *testing.T) {
	rec, _, _ := recordedCreateOrder(t)
	text, err := rec.ReplayText()
	if err != nil {
		t.Fatal(err)
	}
	got := scriptStatements(text)
	if len(rec.Statements) != 1 || len(got) != 1 || !strings.Contains(got[0], "FROM seckill_create_order(") {
		t.Fatalf("%d recorded statements, script:\n%s", len(rec.Statements), text)
	}
	vars := map[string]bool{}
	for _, v := range regexp.MustCompile(`(^|[^:]):([A-Za-z0-9_]+)`).FindAllStringSubmatch(text, -1) {
		vars[v[2]] = true
	}
	if len(vars) != 2 || !vars["uid"] || !vars["r"] {
		t.Errorf("variables %v, want only :uid and :r", vars)
	}
	if !strings.Contains(text, `E'OCCUPY\x3a' || md5(:r::text || '`) {
		t.Errorf("the ledger key does not derive from the transaction's reservation id:\n%s", text)
	}
}

// The rendered scripts run in pgbench: five transactions write five orders
// and take five units, with the stock update in place and moved last.
func TestRecordedReplayRunsInPGBench(t *testing.T) {
	rec, dsn, pool := recordedCreateOrder(t)
	path, err := findPGBench("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	count := func() (orders, taken int64) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT initial_stock - available_stock FROM sku_inventory
			WHERE activity_id = $1 AND sku_id = $2)`, rec.ActivityID, rec.SKUID).Scan(&orders, &taken); err != nil {
			t.Fatal(err)
		}
		return orders, taken
	}
	text, err := rec.ReplayText()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "replay.sql")
	if err := os.WriteFile(script, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o0, s0 := count()
	var out bytes.Buffer
	cmd := exec.Command(path, "-n", "-M", "prepared", "-f", script, "-t", "5", dsn) // #nosec G204 -- the test's own pgbench and script
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgbench: %v\n%s\nscript:\n%s", err, out.String(), text)
	}
	res, err := ParsePGBench(out.String())
	if err != nil || res.Processed != 5 || res.Failed != 0 {
		t.Fatalf("%+v %v\n%s", res, err, out.String())
	}
	if o1, s1 := count(); o1-o0 != 5 || s1-s0 != 5 {
		t.Errorf("%d orders and %d units taken, want 5 and 5", o1-o0, s1-s0)
	}
}
