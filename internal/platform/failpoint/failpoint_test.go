//go:build failpoints

package failpoint

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestCheck(t *testing.T) {
	var nilSet *Set
	if nilSet.Check(AfterRedisReserve) != nil {
		t.Fatal("nil set fired")
	}
	s := &Set{}
	s.Arm(AfterRedisReserve, 2)
	for i := 0; i < 2; i++ {
		if err := s.Check(AfterRedisReserve); !errors.Is(err, ErrInjected) {
			t.Fatalf("firing %d: %v", i, err)
		}
	}
	if s.Check(AfterRedisReserve) != nil || s.Check(AfterOrderInsert) != nil {
		t.Fatal("fired beyond its count or unarmed name fired")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("SECKILL_FAILPOINTS", "after_redis_reserve, during_commit_response=1")
	s, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.Check(DuringCommitResponse) == nil || s.Check(DuringCommitResponse) != nil {
		t.Fatal("count 1 not honoured")
	}
	if s.Check(AfterRedisReserve) == nil || s.Check(AfterRedisReserve) == nil {
		t.Fatal("unlimited failpoint stopped")
	}
	t.Setenv("SECKILL_FAILPOINTS", "x=0")
	if _, err := FromEnv(); err == nil {
		t.Fatal("bad count accepted")
	}
}

func TestParseModes(t *testing.T) {
	s, err := Parse("after_order_insert=1:crash, after_inbox_insert=50%, after_cancel_pending:crash")
	if err != nil {
		t.Fatal(err)
	}
	var crashed []string
	s.CrashFunc = func(name string) { crashed = append(crashed, name) }
	if err := s.Check(AfterOrderInsert); !errors.Is(err, ErrInjected) || len(crashed) != 1 || crashed[0] != AfterOrderInsert {
		t.Fatalf("crash point = %v, crashed %v", err, crashed)
	}
	if s.Check(AfterOrderInsert) != nil {
		t.Fatal("count 1 crash fired twice")
	}
	fired := 0
	for range 2000 {
		if s.Check(AfterInboxInsert) != nil {
			fired++
		}
	}
	if fired < 800 || fired > 1200 {
		t.Fatalf("50%% fired %d of 2000", fired)
	}
	for i := range 3 {
		_ = s.Check(AfterCancelPending)
		if len(crashed) != 2+i {
			t.Fatalf("unlimited crash point fired %d times after %d passes", len(crashed)-1, i+1)
		}
	}
	for _, bad := range []string{"nope", "after_order_insert=0", "after_order_insert=150%", "after_order_insert=x:crash", "after_order_insert=-5%"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// A crash-mode failpoint kills its process with SIGKILL: the child (this
// test binary re-run) dies by the signal, after writing the crash line, and
// runs nothing after the failpoint (no deferred function, no later output).
func TestCrashKillsTheProcess(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		s, _ := Parse(AfterOrderInsert + "=1:crash")
		defer fmt.Println("DEFERRED RAN")
		_ = s.Check(AfterOrderInsert)
		fmt.Println("AFTER THE FAILPOINT")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillsTheProcess$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child = %v (%s), want killed", err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, want SIGKILL", ee)
	}
	if !strings.Contains(string(out), CrashMarker+AfterOrderInsert) || strings.Contains(string(out), "AFTER") || strings.Contains(string(out), "DEFERRED") {
		t.Fatalf("child output %q", out)
	}
}

// Next takes a count as Check would; Unfire gives it back when the point was
// not reached, so the failpoint still fires exactly as often as armed.
func TestNextAndUnfire(t *testing.T) {
	s := &Set{}
	s.Arm(AfterOrderInsert, 1)
	d := s.Next(AfterInboxInsert, AfterOrderInsert)
	if d.Name != AfterOrderInsert {
		t.Fatalf("Next = %+v, want %s", d, AfterOrderInsert)
	}
	if got := s.Next(AfterOrderInsert); got.Name != "" {
		t.Fatalf("a count of 1 decided twice: %+v", got)
	}
	s.Unfire(d) // the point was not reached
	if err := s.Fire(s.Next(AfterOrderInsert)); !errors.Is(err, ErrInjected) {
		t.Fatalf("after Unfire: %v, want the failpoint to fire once more", err)
	}
	if err := s.Check(AfterOrderInsert); err != nil {
		t.Fatalf("fired more often than armed: %v", err)
	}
	s.ArmMode(AfterInboxInsert, Mode{Probability: 1})
	d = s.Next(AfterInboxInsert)
	s.Unfire(d) // nothing counted: nothing to give back
	if m := s.modes[AfterInboxInsert]; m.Times != -1 && m.Times != 0 {
		t.Fatalf("probability mode changed by Unfire: %+v", m)
	}
}
