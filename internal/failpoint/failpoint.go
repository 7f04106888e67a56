// Package failpoint injects crashes at named points of the code (seed §13.3),
// so tests can prove the system converges after a failure there.
//
// A failpoint is armed by the environment variable SECKILL_FAILPOINTS
// ("name1,name2=3": name2 fires only 3 times) read when a Set is built, or
// programmatically by tests with Arm. Disarmed failpoints cost one atomic load.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// Failpoints beyond the seed's ten, for regression tests of paths found later.
const (
	// AfterRepairCommit: ApplyRepair committed its decision, its answer is lost.
	AfterRepairCommit = "after_repair_commit"
)

// ErrInjected is the error a fired failpoint returns; code that checks a
// failpoint stops there as if the process had died.
var ErrInjected = errors.New("failpoint: injected crash")

// Set is a set of armed failpoints. The zero value and nil have none armed.
type Set struct {
	armed atomic.Bool
	mu    sync.Mutex
	left  map[string]int // remaining firings; <0 means unlimited
}

// FromEnv builds a Set from SECKILL_FAILPOINTS.
func FromEnv() (*Set, error) {
	s := &Set{}
	spec := strings.TrimSpace(os.Getenv("SECKILL_FAILPOINTS"))
	if spec == "" {
		return s, nil
	}
	for _, item := range strings.Split(spec, ",") {
		name, count, hasCount := strings.Cut(strings.TrimSpace(item), "=")
		n := -1
		if hasCount {
			v, err := strconv.Atoi(count)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("SECKILL_FAILPOINTS: %q: count must be a positive integer", item)
			}
			n = v
		}
		s.Arm(name, n)
	}
	return s, nil
}

// Arm makes name fire times times (times < 0: until disarmed).
func (s *Set) Arm(name string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left == nil {
		s.left = map[string]int{}
	}
	s.left[name] = times
	s.armed.Store(true)
}

// Disarm stops name from firing.
func (s *Set) Disarm(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.left, name)
	s.armed.Store(len(s.left) > 0)
}

// Check returns ErrInjected (wrapped with the name) when name is armed.
func (s *Set) Check(name string) error {
	if s == nil || !s.armed.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.left[name]
	if !ok {
		return nil
	}
	if n > 0 {
		if n == 1 {
			delete(s.left, name)
			s.armed.Store(len(s.left) > 0)
		} else {
			s.left[name] = n - 1
		}
	}
	return fmt.Errorf("%w at %s", ErrInjected, name)
}
