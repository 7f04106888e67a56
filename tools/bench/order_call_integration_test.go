package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/testenv"
)

// callScript is leg (a')'s script on a fresh database with a sale of one
// SKU (1000 units).
func callScript(t *testing.T) (PGBenchScript, string, string, *pgxpool.Pool) {
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
	ps := PGBenchScript{ActivityID: activity, SKUID: sku, PriceCents: orderPrice, ConsumerGroup: orders.ConsumerGroup,
		Topic: Topic, PayloadHash: make([]byte, 32), OutboxPayload: []byte(`{"a":1}`), PaymentTimeoutSeconds: 900}
	text, err := ps.CallText()
	if err != nil {
		t.Fatal(err)
	}
	return ps, text, dsn, pool
}

// The script is CreateOrder's one statement, the call of the order
// transaction seckill_create_order, with the script's own ids and user, and
// it runs in pgbench: five transactions write five orders (each with its
// ledger row keyed by its reservation) and take five units.
func TestCallScriptRunsInPGBench(t *testing.T) {
	ps, text, dsn, pool := callScript(t)
	if got := scriptStatements(text); len(got) != 1 || !strings.Contains(got[0], "FROM seckill_create_order(") {
		t.Fatalf("script:\n%s", text)
	}
	vars := map[string]bool{}
	for _, v := range regexp.MustCompile(`(^|[^:]):([A-Za-z0-9_]+)`).FindAllStringSubmatch(text, -1) {
		vars[v[2]] = true
	}
	if len(vars) != 2 || !vars["uid"] || !vars["r"] {
		t.Errorf("variables %v, want only :uid and :r", vars)
	}
	path, err := findPGBench("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	count := func() (orders, taken, ledger int64) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT initial_stock - available_stock FROM sku_inventory
			WHERE activity_id = $1 AND sku_id = $2), (SELECT count(*) FROM inventory_ledger l JOIN orders o USING (order_id, reservation_id)
			WHERE l.idempotency_key = 'OCCUPY:' || l.reservation_id::text)`,
			ps.ActivityID, ps.SKUID).Scan(&orders, &taken, &ledger); err != nil {
			t.Fatal(err)
		}
		return orders, taken, ledger
	}
	script := filepath.Join(t.TempDir(), "call.sql")
	if err := os.WriteFile(script, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o0, s0, l0 := count()
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
	if o1, s1, l1 := count(); o1-o0 != 5 || s1-s0 != 5 || l1-l0 != 5 {
		t.Errorf("%d orders, %d units taken, %d ledger rows keyed by their reservation; want 5, 5, 5", o1-o0, s1-s0, l1-l0)
	}
}

// scriptStatements are the script's lines that are SQL.
func scriptStatements(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "--") && !strings.HasPrefix(l, `\`) {
			out = append(out, l)
		}
	}
	return out
}
