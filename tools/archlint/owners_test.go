package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

const ownersFixture = "# x\n\nOne owner per table:\n\n| table | owner |\n|---|---|\n" +
	"| `event_outbox` | `internal/outbox` (`outbox.go`) |\n" +
	"| `orders`, `order_item` | `internal/orders` |\n" +
	"| Redis keys of a SKU | `lua/` |\n\nafter\n\n| `later` | `internal/later` |\n"

func TestParseOwners(t *testing.T) {
	owners, err := parseOwners(ownersFixture)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"event_outbox": "internal/outbox", "orders": "internal/orders", "order_item": "internal/orders"}
	if len(owners) != len(want) {
		t.Errorf("owners %v, want %v (the Redis row and the table after the first are not rows of it)", owners, want)
	}
	for table, owner := range want {
		if owners[table] != owner {
			t.Errorf("owner of %s = %q, want %q", table, owners[table], owner)
		}
	}
	for doc, wantErr := range map[string]string{
		"no table here": "no \"One owner per table\" table",
		"One owner per table\n\n| `a` | `x` |\n| `a` | `y` |\n": "table a has two owners",
		"One owner per table\n\n| Redis | `lua/` |\n":           "names no table",
	} {
		if _, err := parseOwners(doc); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseOwners(%q) = %v, want an error saying %q", doc, err, wantErr)
		}
	}
}

func TestCheckWritesFindsWritesOutsideTheOwner(t *testing.T) {
	owners := map[string]string{"event_outbox": "internal/outbox"}
	src := func(sql string) string { return "package x\n\nconst q = `" + sql + "`\n" }
	cases := []struct{ rel, sql, want string }{
		{"workers/relay/relay.go", "UPDATE event_outbox SET status = 'SENT'", "owned by internal/outbox"},
		{"internal/reconcile/r.go", "INSERT INTO event_outbox (event_id) VALUES ($1)", "owned by internal/outbox"},
		{"app/a.go", "DELETE FROM event_outbox WHERE true", "owned by internal/outbox"},
		{"internal/outbox/x.go", "INSERT INTO unowned_table (a) VALUES (1)", "unowned_table, which docs/architecture.md gives no owner"},
	}
	for _, c := range cases {
		got := writes(t, c.rel, src(c.sql), owners)
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%s %q: violations %q, want one containing %q", c.rel, c.sql, got, c.want)
		}
	}
	ok := []struct{ rel, sql string }{
		{"internal/outbox/relay.go", "UPDATE event_outbox SET status = 'SENT'"},                                   // the owner
		{"internal/explain/e.go", "SELECT status FROM event_outbox WHERE event_id = $1 FOR UPDATE"},               // a read
		{"internal/outbox/o.go", "INSERT INTO event_outbox (event_id) VALUES ($1) ON CONFLICT DO UPDATE SET a=1"}, // DO UPDATE names no table
		{"tools/bench/b.go", "UPDATE event_outbox SET status = 'SENT'"},                                           // development code
		{"internal/testenv/t.go", "DELETE FROM event_outbox"},
	}
	for _, c := range ok {
		if got := writes(t, c.rel, src(c.sql), owners); len(got) != 0 {
			t.Errorf("%s %q: violations %q, want none", c.rel, c.sql, got)
		}
	}
}

func writes(t *testing.T, rel, src string, owners map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return checkWrites(fset, f, rel, owners)
}

// The module's own owner table names every table its migrations create.
func TestModuleOwnersTableCoversTheMigrations(t *testing.T) {
	owners, problems, err := loadOwners("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Errorf("owner table problems: %q", problems)
	}
	if owners["event_outbox"] != "internal/outbox" || owners["refund_task"] != "internal/payments" {
		t.Errorf("owners of event_outbox, refund_task = %q, %q; want internal/outbox, internal/payments",
			owners["event_outbox"], owners["refund_task"])
	}
}
