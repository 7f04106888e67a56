package state_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// TestCheckConstraintsMatch: the status CHECK constraint of every table, as
// the migrated database holds it, lists exactly the statuses of its machine.
func TestCheckConstraintsMatch(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	quoted := regexp.MustCompile(`'([^']*)'`)
	for _, c := range columns() {
		if c.table == "" {
			continue
		}
		rows, err := pool.Query(context.Background(), `
			SELECT pg_get_constraintdef(oid) FROM pg_constraint
			WHERE conrelid = $1::regclass AND contype = 'c'
			  AND pg_get_constraintdef(oid) ~ '\(\(*status\)*(::text)? = ANY'`, c.table)
		if err != nil {
			t.Fatal(err)
		}
		var defs []string
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				t.Fatal(err)
			}
			defs = append(defs, d)
		}
		rows.Close()
		if len(defs) != 1 {
			t.Errorf("%s: %d status CHECK constraints (%q), want 1", c.table, len(defs), defs)
			continue
		}
		var got []string
		for _, m := range quoted.FindAllStringSubmatch(defs[0], -1) {
			got = append(got, m[1])
		}
		want := slices.Clone(c.states)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: CHECK allows %v, %s lists %v", c.table, got, c.name, want)
		}
	}
}
