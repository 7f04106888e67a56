package e2e

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The chaos tests run their short forms in `make test`; `make chaos` runs
// the long forms by setting these (docs/chaos.md#long-forms):
//
//	SECKILL_CRASH_RUNS        crash-point matrix: pipelined runs per failpoint (5)
//	SECKILL_CRASH_FAILPOINTS  crash-point matrix: a comma-separated subset of failpoint.Seed (all)
//	SECKILL_KILL_SOAK         kill soak: how long to keep killing (unset: TestKillSoak skips)
//	SECKILL_KILL_EVERY        kill soak: mean time between kills (20s)
//	SECKILL_KILL_COMPONENTS   kill soak: a comma-separated subset of KillTargets (all)
//	SECKILL_FREEZE            freeze soak: how long each freeze lasts (5s)
//	SECKILL_FREEZE_ROUNDS     freeze soak: freezes of each component (1)
//	SECKILL_CHAOS_TIMEOUT     bound on each of these tests (15m)

// envInt is a positive integer from the environment, else def; anything
// else fails the test.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration is a positive duration from the environment, else def.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 20m", name, v)
	}
	return d
}

// envList is a comma-separated subset of allowed from the environment, else nil (all).
func envList(t *testing.T, name string, allowed []string) []string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	known := map[string]bool{}
	for _, a := range allowed {
		known[a] = true
	}
	out := strings.Split(v, ",")
	for _, s := range out {
		if !known[s] {
			t.Fatalf("%s: %q is not one of %s", name, s, strings.Join(allowed, ","))
		}
	}
	return out
}

// progressTo is where a chaos test's progress lines go: live to stderr under
// go test -v (make chaos: a long form shows how far it got), else into out,
// which the test logs with its report.
func progressTo(out io.Writer) io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return out
}
