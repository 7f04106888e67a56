package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Each call made during the freeze is counted once, in its class; calls
// before or after it, or of the other kind, are not.
func TestCallerStatsCountsTheFreezeWindow(t *testing.T) {
	t0 := time.Now()
	at := func(s, d int, status int, ra, budgeted bool) call {
		return call{at: t0.Add(time.Duration(s) * time.Second), done: t0.Add(time.Duration(s+d) * time.Second),
			status: status, retryAfter: ra, budgeted: budgeted}
	}
	calls := []call{
		at(-1, 1, http.StatusAccepted, false, true), // before
		at(1, 0, http.StatusAccepted, false, true),
		at(2, 1, http.StatusServiceUnavailable, true, true),
		at(3, 0, http.StatusServiceUnavailable, false, true),
		at(4, 5, 0, false, true),
		at(5, 0, http.StatusInternalServerError, false, true),
		at(6, 2, http.StatusOK, false, false),       // another kind
		at(11, 0, http.StatusAccepted, false, true), // after
	}
	var s CallerStats
	s.add(calls, t0, t0.Add(10*time.Second), true)
	want := CallerStats{Requests: 5, OK: 1, Unavailable: 1, NoRetryHint: 1, NoAnswer: 1, OtherErrors: 1, Max: 5 * time.Second, P99: 5 * time.Second}
	s.took = nil
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
}

// A process's descendants are found, parents first.
func TestWithDescendantsFindsChildren(t *testing.T) {
	got := withDescendants([]int{os.Getppid()})
	if got[0] != os.Getppid() || !slices.Contains(got, os.Getpid()) {
		t.Fatalf("descendants of %d: %v, want it first and this test (%d) among them", os.Getppid(), got, os.Getpid())
	}
}

// A running process is no zombie; a child that exited unwaited is one.
func TestIsZombie(t *testing.T) {
	if isZombie(os.Getpid()) {
		t.Fatal("this test is a zombie")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !isZombie(cmd.Process.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d exited unwaited but is no zombie after 10s", cmd.Process.Pid)
		}
	}
}
