package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The failover tests (failover_*_test.go) kill an engine's node of the
// shared stack for good mid-burst; each runs only by its make target
// (SECKILL_FAILOVER names it), alone on the machine.

// The stack's directory (pid files) and script, from this package's folder.
const (
	stackDir    = "../.stack"
	stackScript = "../scripts/stack.sh"
)

// killStackProcess SIGKILLs the stack process whose pid file is name and
// waits until it is gone.
func killStackProcess(name string) error {
	pid, err := stackPidOf(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s (pid %d): %w", name, pid, err)
	}
	for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(10 * time.Millisecond) // the kernel reaps it (or it stays a zombie of the script: gone all the same)
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
	}
	return nil
}

// stackPidOf reads the pid file scripts/stack.sh keeps for name (the
// leader of the process group it started).
func stackPidOf(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(stackDir, "pids", name+".pid")) // #nosec G304 -- the stack's own pid file
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file of %s: %w", name, err)
	}
	return pid, nil
}

// stackRunning: the stack process whose pid file is name runs.
func stackRunning(name string) bool {
	pid, err := stackPidOf(name)
	return err == nil && syscall.Kill(pid, 0) == nil
}

// stackUp runs scripts/stack.sh with args (it starts what was killed again).
func stackUp(t *testing.T, args ...string) {
	out, err := exec.Command(stackScript, args...).CombinedOutput() // #nosec G204 -- the project's own stack script
	if err != nil {
		t.Errorf("scripts/stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// counters is each series of the counter vector name in reg, keyed by its
// labels ("result=ok,source=gateway").
func counters(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var key []string
			for _, l := range m.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			out[strings.Join(key, ",")] += m.GetCounter().GetValue()
		}
	}
	return out
}
