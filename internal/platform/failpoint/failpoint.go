// Package failpoint injects crashes at named points of the code
// (docs/spec.md#failpoints),
// so tests can prove the system converges after a failure there.
//
// A failpoint is armed by the environment variable SECKILL_FAILPOINTS, read
// when a Set is built, or programmatically by tests with Arm/ArmMode:
//
//	SECKILL_FAILPOINTS="name[=times|=P%][:crash],..."
//
//	after_order_insert            fires every time, as an error
//	after_order_insert=3          fires 3 times
//	after_order_insert=25%        fires on a quarter of the passes (random)
//	after_order_insert=1:crash    kills the process the first time (SIGKILL of
//	                              itself: no deferred cleanup, no flush, no
//	                              rollback sent — a power cut, as far as the
//	                              process can tell)
//
// An error-mode failpoint returns ErrInjected and the code stops there as if
// the process had died (a transaction is rolled back, an activity retried).
// Disarmed failpoints cost one atomic load.
//
// Failpoints exist only in binaries built with -tags failpoints (`make test`,
// the chaos harness): in a production build Check is a constant no-op, and
// SECKILL_FAILPOINTS (or Arm) is refused, so a crash cannot be armed there.
package failpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Names of the failpoints the code checks.
const (
	AfterRedisReserve          = "after_redis_reserve"
	AfterMQSendBeforeRedisMark = "after_mq_send_before_redis_mark"
	AfterInboxInsert           = "after_inbox_insert"
	AfterPGStockDecrement      = "after_pg_stock_decrement"
	AfterOrderInsert           = "after_order_insert"
	AfterPGCommitBeforeAck     = "after_pg_commit_before_ack"
	DuringCommitResponse       = "during_commit_response"
	AfterCompensationLua       = "after_compensation_lua"
	AfterPaymentRecordInsert   = "after_payment_record_insert"
	AfterCancelPending         = "after_cancel_pending"
)

// Seed lists the ten failpoints of the crash-point matrix, in the order of a
// request's life.
var Seed = []string{AfterRedisReserve, AfterMQSendBeforeRedisMark, AfterInboxInsert, AfterPGStockDecrement,
	AfterOrderInsert, AfterPGCommitBeforeAck, DuringCommitResponse, AfterCompensationLua,
	AfterPaymentRecordInsert, AfterCancelPending}

// Failpoints beyond those ten, for regression tests of paths found later.
const (
	// AfterRepairCommit: ApplyRepair committed its decision, its answer is lost.
	AfterRepairCommit = "after_repair_commit"
	// RebalanceAfterTake: the rebalancer took a transfer's units from the
	// giving bucket (xfer_take.lua) and stops before the give.
	RebalanceAfterTake = "rebalance_after_take"
	// RebalanceAfterGive: the units are in the receiving bucket
	// (xfer_give.lua); the rebalancer stops before the close.
	RebalanceAfterGive = "rebalance_after_give"
	// RebalanceTakeAnswerLost: xfer_take.lua ran, its answer is lost; the
	// rebalancer retries the take with the same transfer id.
	RebalanceTakeAnswerLost = "rebalance_take_answer_lost"
)

// Known lists every failpoint name the code checks.
var Known = append(slices.Clone(Seed), AfterRepairCommit, RebalanceAfterTake, RebalanceAfterGive, RebalanceTakeAnswerLost)

// ErrInjected is the error a fired failpoint returns; code that checks a
// failpoint stops there as if the process had died.
var ErrInjected = errors.New("failpoint: injected crash")

// Mode says when and how an armed failpoint fires.
type Mode struct {
	// Times is how many times it fires; < 0 means until disarmed. Ignored
	// when Probability is set.
	Times int
	// Probability, if in (0, 1], makes every pass fire with that chance.
	Probability float64
	// Crash kills the process instead of returning ErrInjected.
	Crash bool
}

// Set is a set of armed failpoints. The zero value and nil have none armed.
type Set struct {
	armed atomic.Bool
	mu    sync.Mutex
	modes map[string]*Mode
	// CrashFunc replaces the process kill of crash-mode failpoints (tests).
	CrashFunc func(name string)
}

// FromEnv builds a Set from SECKILL_FAILPOINTS.
func FromEnv() (*Set, error) {
	return Parse(os.Getenv("SECKILL_FAILPOINTS"))
}

// Parse builds a Set from a SECKILL_FAILPOINTS value. An unknown name is an
// error: a typo must not silently arm nothing.
func Parse(spec string) (*Set, error) {
	s := &Set{}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return s, nil
	}
	if !Enabled {
		return nil, errors.New("SECKILL_FAILPOINTS is set, but this binary was built without failpoints (go build -tags failpoints)")
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		body, crash := strings.CutSuffix(item, ":crash")
		name, arg, hasArg := strings.Cut(body, "=")
		if !slices.Contains(Known, name) {
			return nil, fmt.Errorf("SECKILL_FAILPOINTS: %q: unknown failpoint (known: %s)", item, strings.Join(Known, ", "))
		}
		m := Mode{Times: -1, Crash: crash}
		switch {
		case !hasArg:
		case strings.HasSuffix(arg, "%"):
			p, err := strconv.ParseFloat(strings.TrimSuffix(arg, "%"), 64)
			if err != nil || p <= 0 || p > 100 {
				return nil, fmt.Errorf("SECKILL_FAILPOINTS: %q: probability must be in (0%%, 100%%]", item)
			}
			m.Probability = p / 100
		default:
			v, err := strconv.Atoi(arg)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("SECKILL_FAILPOINTS: %q: count must be a positive integer", item)
			}
			m.Times = v
		}
		s.ArmMode(name, m)
	}
	return s, nil
}

// Arm makes name fire times times as an error (times < 0: until disarmed).
func (s *Set) Arm(name string, times int) { s.ArmMode(name, Mode{Times: times}) }

// ArmMode arms name with m. It panics in a binary built without failpoints.
func (s *Set) ArmMode(name string, m Mode) {
	if !Enabled {
		panic("failpoint: this binary was built without failpoints (go build -tags failpoints)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modes == nil {
		s.modes = map[string]*Mode{}
	}
	s.modes[name] = &m
	s.armed.Store(true)
}

// Disarm stops name from firing.
func (s *Set) Disarm(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.modes, name)
	s.armed.Store(len(s.modes) > 0)
}

// Check returns ErrInjected (wrapped with the name) when name is armed and
// fires, or kills the process there if it is a crash-mode failpoint.
func (s *Set) Check(name string) error {
	if !Enabled || s == nil || !s.armed.Load() {
		return nil
	}
	fire, crash := s.fire(name)
	if !fire {
		return nil
	}
	return s.act(name, crash)
}

// Decision is the failpoint Next chose to fire, if any.
type Decision struct {
	Name    string // "" when none fires
	crash   bool
	counted bool // a count was taken from a Times mode: Unfire gives it back
}

// Next decides, in order, whether one of names fires now and returns the
// first that does, consuming its count as Check would. The caller lets code
// it does not run itself (a server-side function) stop at that point, then
// calls Fire to crash or fail there as Check would have.
func (s *Set) Next(names ...string) Decision {
	if !Enabled || s == nil || !s.armed.Load() {
		return Decision{}
	}
	for _, n := range names {
		s.mu.Lock()
		m, ok := s.modes[n]
		counted := ok && m.Probability == 0 && m.Times > 0
		s.mu.Unlock()
		if fire, crash := s.fire(n); fire {
			return Decision{Name: n, crash: crash, counted: counted}
		}
	}
	return Decision{}
}

// Armed says whether one of names is armed now (it would fire on a pass),
// without consuming anything.
func (s *Set) Armed(names ...string) bool {
	if !Enabled || s == nil || !s.armed.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if _, ok := s.modes[n]; ok {
			return true
		}
	}
	return false
}

// Fire acts out a Decision of Next: the crash, or ErrInjected.
func (s *Set) Fire(d Decision) error { return s.act(d.Name, d.crash) }

// Unfire gives back a Decision whose point the code did not reach (the
// server-side function took another path, or failed before it): a count
// taken from a Times mode is restored, so the failpoint fires the next time
// its point is reached, as Check would have.
func (s *Set) Unfire(d Decision) {
	if !Enabled || s == nil || d.Name == "" || !d.counted {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.modes[d.Name]; ok {
		m.Times++
		return
	}
	if s.modes == nil {
		s.modes = map[string]*Mode{}
	}
	s.modes[d.Name] = &Mode{Times: 1, Crash: d.crash}
	s.armed.Store(true)
}

func (s *Set) act(name string, crash bool) error {
	if crash {
		if s.CrashFunc != nil {
			s.CrashFunc(name)
			return fmt.Errorf("%w at %s", ErrInjected, name)
		}
		Crash(name)
	}
	return fmt.Errorf("%w at %s", ErrInjected, name)
}

func (s *Set) fire(name string) (fire, crash bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.modes[name]
	if !ok {
		return false, false
	}
	if m.Probability > 0 {
		return rand.Float64() < m.Probability, m.Crash // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	}
	if m.Times > 0 {
		if m.Times--; m.Times == 0 {
			delete(s.modes, name)
			s.armed.Store(len(s.modes) > 0)
		}
	}
	return true, m.Crash
}

// CrashMarker starts the line a crash-mode failpoint writes to stderr just
// before the process kills itself; harnesses read it to tell an injected
// crash from any other death.
const CrashMarker = "FAILPOINT CRASH "

// Crash writes the crash line and kills the process with SIGKILL: nothing
// after this point runs, as in a power cut.
func Crash(name string) {
	fmt.Fprintf(os.Stderr, "%s%s pid=%d\n", CrashMarker, name, os.Getpid())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	os.Exit(137) // not reached
}
