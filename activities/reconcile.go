package activities

import (
	"context"
	"errors"

	"github.com/seckill/seckill/internal/reconcile"
)

type (
	// ReconcileInput is the Reconcile activity's input.
	ReconcileInput = reconcile.Input
	// ReconcileSummary is what the Reconcile activity returns (the full
	// report is in reconcile_report).
	ReconcileSummary = reconcile.Summary
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

// Reconcile runs one reconciliation and stores its report.
func (a *Reconciliation) Reconcile(ctx context.Context, in ReconcileInput) (ReconcileSummary, error) {
	rep, err := a.r.Run(ctx, in.ActivityID)
	if err != nil {
		return ReconcileSummary{}, err
	}
	return rep.Summarize(), nil
}
