// Package backoff is the one exponential backoff of the workers: the send-due
// scanner, the outbox relay and the refund relay wait base·2^(attempt-1)
// after a failed attempt, never longer than a cap.
package backoff

import (
	"context"
	"time"
)

// Exponential is base·2^(attempt-1), capped at limit (attempt 1 or less: base).
func Exponential(base, limit time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Sleep waits d, or until ctx ends (then its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
