package poll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/skuloop"
)

// rig runs a loop on ticks of its own; each step reports on calls (unbuffered)
// and answers with the next of answers.
type rig struct {
	ticks    chan time.Time
	calls    chan int
	acquired chan int // lease tests: each Acquire reports here
	logs     bytes.Buffer
	done     chan error
}

func newRig() *rig {
	return &rig{ticks: make(chan time.Time), calls: make(chan int), done: make(chan error, 1)}
}

func (r *rig) opts() Options {
	return Options{Log: slog.New(slog.NewJSONHandler(&r.logs, nil)), FailedEvent: "test.step_failed", ticks: r.ticks}
}

type answer struct {
	more bool
	err  error
}

func (r *rig) start(ctx context.Context, o Options, answers []answer) {
	n := 0
	go func() {
		r.done <- Run(ctx, o, func(context.Context) (bool, error) {
			n++
			r.calls <- n
			a := answers[min(n, len(answers))-1]
			return a.more, a.err
		})
	}()
}

// want receives the next step call, made without a tick, and fails unless
// it is call n (a loop waiting for a tick instead takes the one offered).
func (r *rig) want(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-r.calls:
		if got != n {
			t.Fatalf("step call %d, want %d", got, n)
		}
	case r.ticks <- time.Now():
		t.Fatalf("the loop waited for a tick instead of making step call %d at once", n)
	}
}

// tick delivers one tick, failing if the loop steps again instead of waiting for it.
func (r *rig) tick(t *testing.T) {
	t.Helper()
	select {
	case n := <-r.calls:
		t.Fatalf("step call %d ran without waiting for a tick", n)
	case n := <-r.acquired:
		t.Fatalf("acquire %d ran without waiting for a tick", n)
	case r.ticks <- time.Now():
	}
}

func (r *rig) stop(t *testing.T, cancel context.CancelFunc) {
	t.Helper()
	cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("Run returned %v after ctx ended, want nil", err)
	}
}

// events is the msg of every log line, and the error of each.
func (r *rig) events(t *testing.T) (msgs, errs []string) {
	t.Helper()
	for line := range strings.Lines(r.logs.String()) {
		var rec struct{ Msg, Error string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		msgs, errs = append(msgs, rec.Msg), append(errs, rec.Error)
	}
	return msgs, errs
}

func TestFullBatchRunsAgainAtOnceThenWaitsForATick(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	r.start(ctx, r.opts(), []answer{{more: true}, {more: true}, {more: false}, {more: false}})
	r.want(t, 1)
	r.want(t, 2) // no tick sent: calls 2 and 3 follow at once
	r.want(t, 3)
	r.tick(t) // call 3 reported no more work: the loop waits for this tick
	r.want(t, 4)
	r.stop(t, cancel)
	if msgs, _ := r.events(t); len(msgs) != 0 {
		t.Errorf("logged %v, want nothing", msgs)
	}
}

func TestFailedStepIsLoggedAndTheLoopGoesOn(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	skuErr := &skuloop.Error{Loop: "test", Failures: []skuloop.Failure{{ActivityID: 1, SKUID: 2, Err: errors.New("down")}}}
	r.start(ctx, r.opts(), []answer{
		{err: errors.New("claim failed")},        // logged
		{err: skuErr},                            // each SKU logged by its pass already: not again
		{more: true, err: errors.New("partial")}, // logged, and more is still honoured
		{}})
	r.want(t, 1)
	r.tick(t)
	r.want(t, 2)
	r.tick(t)
	r.want(t, 3)
	r.want(t, 4) // call 3 reported more
	r.stop(t, cancel)
	msgs, errs := r.events(t)
	if !slices.Equal(msgs, []string{"test.step_failed", "test.step_failed"}) || !slices.Equal(errs, []string{"claim failed", "partial"}) {
		t.Errorf("logged %v with errors %q, want two test.step_failed lines: claim failed, partial", msgs, errs)
	}
}

func TestStepFailingAsCtxEndsIsNotLoggedAndRunReturns(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	o := r.opts()
	go func() {
		r.done <- Run(ctx, o, func(ctx context.Context) (bool, error) {
			cancel()
			return true, ctx.Err() // even "more" does not keep a cancelled loop going
		})
	}()
	if err := <-r.done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if msgs, _ := r.events(t); len(msgs) != 0 {
		t.Errorf("logged %v, want nothing", msgs)
	}
}

func TestLeaseIsHeldBeforeEachStepAndReleasedOnExit(t *testing.T) {
	r := newRig()
	ctx, cancel := context.WithCancel(context.Background())
	r.acquired = make(chan int)
	var held []bool
	released := 0
	answers := []struct {
		held bool
		err  error
	}{{false, nil}, {false, errors.New("redis down")}, {true, nil}, {true, nil}}
	n := 0
	o := r.opts()
	o.Lease = &Lease{
		Acquire: func(context.Context) (bool, error) {
			n++
			r.acquired <- n
			a := answers[min(n, len(answers))-1]
			return a.held, a.err
		},
		Held:        func(h bool) { held = append(held, h) },
		Release:     func() { released++ },
		FailedEvent: "test.lease_failed",
	}
	r.start(ctx, o, []answer{{more: true}, {}})
	wantAcquire := func(want int) {
		t.Helper()
		select {
		case got := <-r.acquired:
			if got != want {
				t.Fatalf("acquire %d, want %d", got, want)
			}
		case r.ticks <- time.Now():
			t.Fatalf("the loop waited for a tick instead of acquiring (%d)", want)
		}
	}
	wantAcquire(1) // not held: no step, wait for the tick
	r.tick(t)
	wantAcquire(2) // failed: logged, no step
	r.tick(t)
	wantAcquire(3)
	r.want(t, 1) // held: the step runs, reports more
	wantAcquire(4)
	r.want(t, 2)
	r.stop(t, cancel)
	if !slices.Equal(held, []bool{false, false, true, true}) {
		t.Errorf("Held told %v, want [false false true true]", held)
	}
	if released != 1 {
		t.Errorf("released %d times, want once", released)
	}
	msgs, errs := r.events(t)
	if !slices.Equal(msgs, []string{"test.lease_failed"}) || !slices.Equal(errs, []string{"redis down"}) {
		t.Errorf("logged %v with errors %q, want one test.lease_failed: redis down", msgs, errs)
	}
}

func TestIncompleteOptionsAreRefused(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	step := func(context.Context) (bool, error) { return false, nil }
	for name, c := range map[string]struct {
		o    Options
		step Step
		want string
	}{
		"no interval": {Options{Log: log, FailedEvent: "x"}, step, "interval must be positive"},
		"no logger":   {Options{Interval: time.Second, FailedEvent: "x"}, step, "nil step or logger"},
		"no step":     {Options{Interval: time.Second, Log: log, FailedEvent: "x"}, nil, "nil step or logger"},
		"no event":    {Options{Interval: time.Second, Log: log}, step, "empty FailedEvent"},
		"lease without acquire": {Options{Interval: time.Second, Log: log, FailedEvent: "x",
			Lease: &Lease{FailedEvent: "y"}}, step, "a Lease needs Acquire"},
	} {
		err := Run(context.Background(), c.o, c.step)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run = %v, want an error saying %q", name, err, c.want)
		}
	}
}
