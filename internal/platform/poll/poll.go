// Package poll is the one loop of the polling workers (the outbox relay, the
// refund relay, the send-due scanner, the rebalancer): run a step, run it
// again at once while it reports more work, else wait for the next tick,
// until ctx ends. A failed step is logged under the worker's event name and
// the loop goes on; a *skuloop.Error alone is not logged again (each failed
// SKU was logged by its pass). A worker that must hold a lease to step (the
// rebalancer) gives a Lease: it is taken or renewed before each step, and
// released when the loop ends.
package poll

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill/seckill/internal/platform/skuloop"
)

// Step does one round of work and reports whether more is due now (a full
// batch), in which case the loop runs it again without waiting.
type Step func(ctx context.Context) (more bool, err error)

// Options of a loop; Interval, Log and FailedEvent are required.
type Options struct {
	Interval    time.Duration // between steps when the last one reported no more work
	Log         *slog.Logger
	FailedEvent string // the Warn line of a failed step, e.g. "outbox.relay_failed"
	Lease       *Lease // optional

	ticks <-chan time.Time // tests: ticks of their own instead of a ticker of Interval
}

// Lease is what a loop holds before each step: the step runs only while
// Acquire reports the lease held.
type Lease struct {
	Acquire     func(ctx context.Context) (held bool, err error) // take or renew; required
	Held        func(held bool)                                  // told after each Acquire (a gauge); optional
	Release     func()                                           // when the loop ends; optional
	FailedEvent string                                           // the Warn line of a failed Acquire; required
}

// Run steps until ctx ends, then returns nil; it returns an error only for
// incomplete options.
func Run(ctx context.Context, o Options, step Step) error {
	if err := o.check(step); err != nil {
		return err
	}
	if o.Lease != nil && o.Lease.Release != nil {
		defer o.Lease.Release()
	}
	ticks := o.ticks
	if ticks == nil {
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		if o.once(ctx, step) && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}

func (o Options) check(step Step) error {
	switch {
	case step == nil || o.Log == nil:
		return errors.New("poll: nil step or logger")
	case o.Interval <= 0 && o.ticks == nil:
		return errors.New("poll: interval must be positive")
	case o.FailedEvent == "":
		return errors.New("poll: empty FailedEvent")
	case o.Lease != nil && (o.Lease.Acquire == nil || o.Lease.FailedEvent == ""):
		return errors.New("poll: a Lease needs Acquire and FailedEvent")
	}
	return nil
}

// once holds the lease (if any), runs step and reports whether more is due.
func (o Options) once(ctx context.Context, step Step) bool {
	if l := o.Lease; l != nil {
		held, err := l.Acquire(ctx)
		if err != nil && ctx.Err() == nil {
			o.Log.Warn(l.FailedEvent, "error", err)
		}
		if l.Held != nil {
			l.Held(held)
		}
		if !held {
			return false
		}
	}
	more, err := step(ctx)
	if err != nil && ctx.Err() == nil && !skuloop.Only(err) {
		o.Log.Warn(o.FailedEvent, "error", err)
	}
	return more
}
