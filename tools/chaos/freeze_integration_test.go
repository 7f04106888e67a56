package chaos_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/tools/chaos"
)

// The freeze soak, short form (docs/chaos.md has the long one): each
// component in turn is frozen with SIGSTOP for 5 s during sales, then
// resumed. While any component but the gateway itself is frozen, every
// reserve and status read the callers send is answered (a definite answer,
// or 503 with Retry-After), none is left hanging; once resumed every sale
// settles with the invariants holding and nothing left over.
func TestFreezeSoak(t *testing.T) {
	cfg := testenv.Require(t)
	if cfg.RedisCluster() {
		t.Skip(chaos.ErrRedisCluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c, logs := startCluster(ctx, t, cfg)
	defer c.Close()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := chaos.Kill(ctx, c, chaos.KillOptions{Freeze: 5 * time.Second, Rounds: 1, Every: 2 * time.Second,
		Settle: 2 * time.Minute, StackScript: filepath.Join(root, "scripts", "stack.sh"), StackDir: filepath.Join(root, ".stack"),
		Progress: &out})
	rep.Print(&out)
	t.Logf("freeze soak:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(chaos.KillTargets) {
		t.Fatalf("%d components frozen, want %d", len(rep.Rows), len(chaos.KillTargets))
	}
	for _, row := range rep.Rows {
		cs := row.Callers
		switch {
		case row.Runs != 1 || len(row.Errors) > 0:
			t.Errorf("%s: %d runs, errors %v; want one freeze and no error", row.Failpoint, row.Runs, row.Errors)
		case cs == nil || cs.Requests == 0:
			t.Errorf("%s: no caller recorded during the freeze", row.Failpoint)
		case row.Hosts[0] == chaos.ProcAPI:
			// A frozen gateway answers nobody: a load balancer's health
			// check takes it out. Its callers are in the report.
		case cs.NoAnswer > 0 || cs.NoRetryHint > 0 || cs.OtherErrors > 0:
			t.Errorf("%s: callers of reserve and reads saw %s; want each answered, a 503 only with Retry-After", row.Failpoint, cs)
		}
	}
	if n := rep.Violations(); n > 0 || len(rep.Leftovers) > 0 {
		for _, name := range []string{chaos.ProcAPI, chaos.ProcSaga, chaos.ProcStarter, chaos.ProcRest} {
			b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
			t.Logf("%s log (last 4 KiB):\n%s", name, tail(b, 4096))
		}
		t.Fatalf("%d violations, leftovers %v", n, rep.Leftovers)
	}
}
