package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// The freeze soak, short form (docs/chaos.md has the long one): each
// component in turn is frozen with SIGSTOP for 5 s (SECKILL_FREEZE) during
// sales, then resumed, once (SECKILL_FREEZE_ROUNDS). While any component but
// the gateway itself is frozen, every reserve and status read the callers
// send is answered (a definite answer, or 503 with Retry-After), none is
// left hanging; once resumed every sale settles with the invariants holding
// and nothing left over.
func TestFreezeSoak(t *testing.T) {
	rounds := envInt(t, "SECKILL_FREEZE_ROUNDS", 1)
	rep := runSoak(t, KillOptions{Freeze: envDuration(t, "SECKILL_FREEZE", 5*time.Second), Rounds: rounds, Every: 2 * time.Second,
		Settle: 2 * time.Minute})
	if len(rep.Rows) != len(KillTargets) {
		t.Fatalf("%d components frozen, want %d", len(rep.Rows), len(KillTargets))
	}
	for _, row := range rep.Rows {
		cs := row.Callers
		switch {
		case row.Runs != rounds || len(row.Errors) > 0:
			t.Errorf("%s: %d runs, errors %v; want %d freezes and no error", row.Failpoint, row.Runs, row.Errors, rounds)
		case cs == nil || cs.Requests == 0:
			t.Errorf("%s: no caller recorded during the freeze", row.Failpoint)
		case row.Hosts[0] == ProcAPI:
			// A frozen gateway answers nobody: a load balancer's health
			// check takes it out. Its callers are in the report.
		case cs.NoAnswer > 0 || cs.NoRetryHint > 0 || cs.OtherErrors > 0:
			t.Errorf("%s: callers of reserve and reads saw %s; want each answered, a 503 only with Retry-After", row.Failpoint, cs)
		}
	}
}

// The kill soak, long form only (`make chaos`; docs/chaos.md): for
// SECKILL_KILL_SOAK a random component (SECKILL_KILL_COMPONENTS) is SIGKILLed
// every SECKILL_KILL_EVERY (±50%) during sales and restarted; then every
// sale must settle with the invariants holding and nothing left over.
func TestKillSoak(t *testing.T) {
	if os.Getenv("SECKILL_KILL_SOAK") == "" {
		t.Skip("the kill soak runs by `make chaos` (SECKILL_KILL_SOAK=20m)")
	}
	rep := runSoak(t, KillOptions{Duration: envDuration(t, "SECKILL_KILL_SOAK", 0), Every: envDuration(t, "SECKILL_KILL_EVERY", 20*time.Second),
		Components: envList(t, "SECKILL_KILL_COMPONENTS", KillTargets)})
	for _, row := range rep.Rows {
		if len(row.Errors) > 0 {
			t.Errorf("%s: errors %v", row.Failpoint, row.Errors)
		}
	}
}

// runSoak runs a kill or freeze soak on a cluster of its own and fails the test
// on any violation or leftover, with the processes' logs.
func runSoak(t *testing.T, o KillOptions) Report {
	t.Helper()
	cfg := testenv.Require(t)
	if cfg.RedisCluster() {
		t.Skip(ErrRedisCluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), envDuration(t, "SECKILL_CHAOS_TIMEOUT", 15*time.Minute))
	t.Cleanup(cancel)
	c, logs := startCluster(ctx, t, cfg)
	t.Cleanup(c.Close)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o.StackScript, o.StackDir, o.Progress = filepath.Join(root, "scripts", "stack.sh"), filepath.Join(root, ".stack"), progressTo(&out)
	rep, err := Kill(ctx, c, o)
	rep.Print(&out)
	t.Logf("soak:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Violations(); n > 0 || len(rep.Leftovers) > 0 {
		for _, name := range []string{ProcAPI, ProcSaga, ProcStarter, ProcRest} {
			b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
			t.Logf("%s log (last 4 KiB):\n%s", name, tail(b, 4096))
		}
		t.Fatalf("%d violations, leftovers %v", n, rep.Leftovers)
	}
	return rep
}
