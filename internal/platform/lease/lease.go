// Package lease sizes a claimer's work to the lease that covers it: the
// send-due scanner, the outbox relay and the refund relay claim items for a
// lease and must never still work an item once its lease has run out (another
// claimer takes it then, and would send it a second time and count a second
// attempt). A Budget is taken just before the claim, so the lease the store
// records (counted from a later instant) ends no earlier than the Budget
// thinks; a claimer starts a piece of work only when its whole timeout Fits
// before Deadline, which keeps Slack in hand to record the outcome, and
// hands back (or leaves to expire) the items it did not start.
package lease

import "time"

// maxSlack bounds Slack: recording one outcome is one store round trip,
// however long the lease.
const maxSlack = time.Second

// Slack is the part of a lease a claimer keeps for recording the outcome
// of its last piece of work: a fifth of the lease, at most a second.
func Slack(lease time.Duration) time.Duration { return min(lease/5, maxSlack) }

// MaxTimeout is the longest timeout of one piece of work a lease allows:
// half of what the lease leaves after its Slack, so that the first piece
// still fits after the round trips that precede it (the claim itself,
// reading the item).
func MaxTimeout(lease time.Duration) time.Duration { return (lease - Slack(lease)) / 2 }

// Cap returns timeout, cut to MaxTimeout(lease) when it is longer, and
// whether it was cut.
func Cap(timeout, lease time.Duration) (time.Duration, bool) {
	if m := MaxTimeout(lease); timeout > m {
		return m, true
	}
	return timeout, false
}

// Budget is what is left of one claim's lease.
type Budget struct{ deadline time.Time }

// Start begins the budget of a claim of length lease about to be made at
// now (a reading of time.Now taken before the claim is sent).
func Start(now time.Time, lease time.Duration) Budget {
	return Budget{deadline: now.Add(lease - Slack(lease))}
}

// Deadline is when work under the claim must be over: the lease's end less
// its Slack.
func (b Budget) Deadline() time.Time { return b.deadline }

// Fits reports whether work that may take up to d, started at now, ends by
// the Deadline.
func (b Budget) Fits(now time.Time, d time.Duration) bool { return !now.Add(d).After(b.deadline) }
