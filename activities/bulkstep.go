package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state/steps"
)

// BulkSlice is one activity's share of a page of a bulk repair: the sagas
// of the page not handled yet, in order.
type BulkSlice struct {
	BulkBatch
	// BulkID names the bulk repair in bulk_repair_item.
	BulkID string
	// Quota: at most this many more sagas repaired (APPLIED or WOULD_APPLY);
	// refused and skipped ones do not count.
	Quota int
	// Wait before the first signal (what is left of the pace after the
	// previous slice's last signal).
	Wait time.Duration `json:",omitempty"`
}

// BulkTally counts what a bulk repair did, by outcome.
type BulkTally struct {
	Applied, Would, Refused, Skipped int
	RefusedByReason                  map[string]int `json:",omitempty"`
}

// Repaired is what counts against the limit: sagas repaired, or that would be.
func (t BulkTally) Repaired() int { return t.Applied + t.Would }

// Add counts one item.
func (t *BulkTally) Add(it steps.BulkItem) {
	switch it.Outcome {
	case steps.BulkApplied:
		t.Applied++
	case steps.BulkWouldApply:
		t.Would++
	case steps.BulkRefused:
		t.Refused++
		if t.RefusedByReason == nil {
			t.RefusedByReason = map[string]int{}
		}
		t.RefusedByReason[it.Reason]++
	case steps.BulkSkipped:
		t.Skipped++
	}
}

// Merge adds the counts of o.
func (t *BulkTally) Merge(o BulkTally) {
	t.Applied, t.Would, t.Refused, t.Skipped = t.Applied+o.Applied, t.Would+o.Would, t.Refused+o.Refused, t.Skipped+o.Skipped
	for r, n := range o.RefusedByReason {
		if t.RefusedByReason == nil {
			t.RefusedByReason = map[string]int{}
		}
		t.RefusedByReason[r] += n
	}
}

// BulkSliceResult is how far a slice got.
type BulkSliceResult struct {
	// Done: sagas of WorkflowIDs handled (and recorded), from the first.
	Done  int
	Tally BulkTally
	// Wait is what is left of the pace after the last signal: the next
	// signal goes no sooner. Longer than BulkSliceMaxWait, the workflow
	// waits it out with a timer.
	Wait time.Duration `json:",omitempty"`
}

// A slice waits for its pace itself up to BulkSliceMaxWait (heartbeating);
// a longer wait is the workflow's timer, so no rate, however slow, outlasts
// the heartbeat timeout. A slice returns after bulkSliceBudget of work, so
// its start-to-close timeout (BulkSliceTimeout) covers it at any rate.
const (
	BulkSliceMaxWait = 20 * time.Second
	bulkSliceBudget  = 2 * time.Minute
	BulkSliceTimeout = 5 * time.Minute
	waitHeartbeat    = 10 * time.Second
)

// RepairSlice checks each saga's repair against PostgreSQL, signals the
// ones it fits (unless a dry run) at most PerSecond, records every outcome
// in bulk_repair_item and returns the counts, never the items: the
// workflow's history stays small whatever the number of sagas. It stops at
// the quota, after bulkSliceBudget, or before a wait longer than
// BulkSliceMaxWait. It heartbeats its result: a retried attempt carries on
// from there (sending again would be harmless: the repair_ids are fixed).
func (b *BulkRepair) RepairSlice(ctx context.Context, in BulkSlice) (BulkSliceResult, error) {
	pace := time.Duration(float64(time.Second) / in.PerSecond)
	res := BulkSliceResult{Wait: in.Wait}
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &res)
	}
	next := time.Now().Add(res.Wait)
	began := time.Now()
	for res.Done < len(in.WorkflowIDs) && res.Tally.Repaired() < in.Quota && time.Since(began) < bulkSliceBudget {
		it, err := b.decide(ctx, in.BulkBatch, in.WorkflowIDs[res.Done])
		if err != nil {
			return res, err
		}
		if it.Outcome == "" {
			if wait := time.Until(next); wait > BulkSliceMaxWait {
				break // the workflow's timer; this saga is checked again after it
			} else if err := sleepHeartbeating(ctx, wait, res); err != nil {
				return res, err
			}
			if it, err = b.send(ctx, in.BulkBatch, it); err != nil {
				return res, err
			}
			next = time.Now().Add(pace)
		}
		if err := repairs.RecordBulkItem(ctx, b.pool, in.BulkID, it); err != nil {
			return res, err
		}
		res.Done++
		res.Tally.Add(it)
		res.Wait = max(time.Until(next), 0)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, res)
		}
	}
	res.Wait = max(time.Until(next), 0)
	return res, nil
}

// sleepHeartbeating waits d, heartbeating details while it does.
func sleepHeartbeating(ctx context.Context, d time.Duration, details any) error {
	if d <= 0 {
		return nil
	}
	done := time.NewTimer(d)
	defer done.Stop()
	tick := time.NewTicker(waitHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done.C:
			return nil
		case <-tick.C:
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, details)
			}
		}
	}
}
