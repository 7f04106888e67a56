package flashsale

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/platform/backoff"
)

// disruption runs Options.Disrupt once, in its own goroutine, while the
// buyers go on.
type disruption struct {
	ctx   context.Context
	fn    func(ctx context.Context) error
	once  sync.Once
	done  chan struct{}
	ended atomic.Bool
	took  time.Duration
	err   error
}

func newDisruption(ctx context.Context, opts Options) *disruption {
	return &disruption{ctx: ctx, fn: opts.Disrupt, done: make(chan struct{})}
}

// start runs the disruption (once; nothing without Options.Disrupt).
func (d *disruption) start() {
	if d.fn == nil {
		return
	}
	d.once.Do(func() {
		go func() {
			defer close(d.done)
			t := time.Now()
			d.err = d.fn(d.ctx)
			d.took = time.Since(t)
			d.ended.Store(true)
		}()
	})
}

// over: the disruption ran to its end.
func (d *disruption) over() bool { return d.ended.Load() }

// wait waits for a started disruption and returns how long it ran.
func (d *disruption) wait() (time.Duration, error) {
	if d.fn == nil {
		return 0, nil
	}
	d.start() // fewer than two buyers: it runs after them
	<-d.done
	return d.took, d.err
}

// retry runs f until it succeeds; with RetryUnavailable, a failure is tried
// again every 200 ms for up to that long (a store failing over).
func (opts Options) retry(ctx context.Context, f func() error) error {
	until := time.Now().Add(opts.RetryUnavailable)
	for {
		err := f()
		if err == nil || !time.Now().Before(until) || ctx.Err() != nil {
			return err
		}
		if werr := backoff.Sleep(ctx, 200*time.Millisecond); werr != nil {
			return err
		}
	}
}
