package activities

import (
	"context"
	"errors"

	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state/steps"
)

// Reconciliation holds the activity of ReconcileWorkflow: one
// reconciliation run (internal/reconcile). Registered beside Activities.
type Reconciliation struct {
	r *reconcile.Reconciler
}

// NewReconciliation returns the activity over r.
func NewReconciliation(r *reconcile.Reconciler) (*Reconciliation, error) {
	if r == nil {
		return nil, errors.New("activities: nil reconciler")
	}
	return &Reconciliation{r: r}, nil
}

// Reconcile runs one reconciliation and stores its report. A run that
// finished but could not check some SKUs (a Redis shard down) succeeds: its
// report and summary name them (FailedSKUs), the metric and alert
// SeckillLoopSKUFailing carry them, and the next scheduled run tries them
// again (retrying the whole run at once would redo every other SKU). Any
// other error fails the attempt, which Temporal retries.
func (a *Reconciliation) Reconcile(ctx context.Context, in steps.ReconcileInput) (steps.ReconcileSummary, error) {
	rep, err := a.r.Run(ctx, in.ActivityID)
	if err != nil && !skuloop.Only(err) {
		return steps.ReconcileSummary{}, err
	}
	s := rep.Summarize()
	s.FailedSKUs = reconcile.FailedSKUs(err)
	return s, nil
}
