package testenv

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
)

// Brownout wraps a real publisher for lease tests. While the brownout is on
// (Begin) every Send takes its whole timeout: it waits for its context to
// end, as a broker that does not answer in time, and fails as
// mq.ErrSendUnknown without reaching the broker; after End it passes every
// Send to Next. It records per message id the Sends begun and the ones Next
// accepted, every Send begun while another Send of the same id was still in
// flight (two claimers working one item at once), and what Check said of
// each Send when it began.
type Brownout struct {
	Next reservation.Publisher
	// Check, when set, is asked at the start of every Send with the
	// deadline of its context (zero: none); a non-empty answer is recorded
	// as a violation.
	Check func(ctx context.Context, m mq.Message, deadline time.Time) string

	mu         sync.Mutex
	on         bool
	inFlight   map[string]int
	calls      map[string]int
	sent       map[string]int
	overlaps   []string
	violations []string
}

// Begin starts the brownout.
func (b *Brownout) Begin() { b.mu.Lock(); b.on = true; b.mu.Unlock() }

// End ends it: later Sends go to Next.
func (b *Brownout) End() { b.mu.Lock(); b.on = false; b.mu.Unlock() }

// Send implements reservation.Publisher.
func (b *Brownout) Send(ctx context.Context, m mq.Message) (mq.SendResult, error) {
	deadline, _ := ctx.Deadline()
	var why string
	if b.Check != nil {
		why = b.Check(ctx, m, deadline)
	}
	b.mu.Lock()
	if b.calls == nil {
		b.inFlight, b.calls, b.sent = map[string]int{}, map[string]int{}, map[string]int{}
	}
	if b.inFlight[m.ID] > 0 {
		b.overlaps = append(b.overlaps, m.ID)
	}
	if why != "" {
		b.violations = append(b.violations, m.ID+": "+why)
	}
	b.inFlight[m.ID]++
	b.calls[m.ID]++
	on := b.on
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.inFlight[m.ID]--; b.mu.Unlock() }()
	if on {
		<-ctx.Done()
		return mq.SendResult{}, fmt.Errorf("%w: brownout: no answer: %w", mq.ErrSendUnknown, ctx.Err())
	}
	res, err := b.Next.Send(ctx, m)
	if err == nil {
		b.mu.Lock()
		b.sent[m.ID]++
		b.mu.Unlock()
	}
	return res, err
}

// Calls is how many Sends of id began.
func (b *Brownout) Calls(id string) int { b.mu.Lock(); defer b.mu.Unlock(); return b.calls[id] }

// Sent is how many Sends of id the real publisher accepted.
func (b *Brownout) Sent(id string) int { b.mu.Lock(); defer b.mu.Unlock(); return b.sent[id] }

// Overlaps are the ids of Sends begun while one of the same id was in flight.
func (b *Brownout) Overlaps() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := append([]string(nil), b.overlaps...)
	sort.Strings(out)
	return out
}

// Violations are what Check reported.
func (b *Brownout) Violations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.violations...)
}

// Await polls cond every 20 ms until it holds, failing t with what() once
// timeout has passed.
func Await(t testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what())
		}
		<-tick.C
	}
}
