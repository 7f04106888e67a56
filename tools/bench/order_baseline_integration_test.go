package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/testenv"
)

// Leg (a)'s script runs in pgbench with the bench's variables on the
// project's tables: five transactions write five orders, five inbox rows
// and five outbox rows and take five units of the SKU.
func TestBaselineScriptRunsInPGBench(t *testing.T) {
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	activity, sku := testenv.ActivityID(), int64(1)
	if _, err := pool.Exec(ctx, `
		INSERT INTO sale_activity (activity_id, name, starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds)
		VALUES ($1, 'baseline test', clock_timestamp() - interval '1 minute', clock_timestamp() + interval '3 hours', 900, 10800)`,
		activity); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock)
		VALUES ($1, $2, $3, 1000, 1000)`, activity, sku, orderPrice); err != nil {
		t.Fatal(err)
	}
	path, err := findPGBench("")
	if err != nil {
		t.Fatal(err)
	}
	count := func() (n [4]int64) {
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE activity_id = $1),
			(SELECT initial_stock - available_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2),
			(SELECT count(*) FROM consumer_inbox WHERE consumer_group = $3),
			(SELECT count(*) FROM event_outbox WHERE payload->>'note' = 'it''s "quoted" \ and: colons')`,
			activity, sku, orders.ConsumerGroup).Scan(&n[0], &n[1], &n[2], &n[3]); err != nil {
			t.Fatal(err)
		}
		return n
	}
	script := filepath.Join(t.TempDir(), "order.sql")
	if err := os.WriteFile(script, []byte(baselineScript), 0o600); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"order_id":"0b7e9c3a-1111-4222-8333-444455556666","note":"it's \"quoted\" \\ and: colons"}`)
	argv := []string{"-n", "-M", "prepared", "-f", script, "-t", "5"}
	for _, v := range baselineVars(activity, sku, orderPrice, orders.ConsumerGroup, Topic, make([]byte, 32), payload, 900) {
		argv = append(argv, "-D", v)
	}
	before := count()
	var out bytes.Buffer
	cmd := exec.Command(path, append(argv, dsn)...) // #nosec G204 -- the test's own pgbench and script
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	res, err := ParsePGBench(out.String())
	if err != nil || res.Processed != 5 || res.Failed != 0 {
		t.Fatalf("%+v %v\n%s", res, err, out.String())
	}
	after := count()
	for i, what := range []string{"orders", "units taken", "inbox rows", "outbox rows with the payload intact"} {
		if d := after[i] - before[i]; d != 5 {
			t.Errorf("%d %s, want 5", d, what)
		}
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
