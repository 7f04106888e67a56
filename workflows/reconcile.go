package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/state/steps"
)

// Reconciliation names.
const (
	// ReconcileScheduleID is the Temporal Schedule that runs ReconcileWorkflow.
	ReconcileScheduleID = "seckill-reconcile"
	// ReconcileWorkflowIDPrefix starts every reconciliation workflow ID.
	ReconcileWorkflowIDPrefix = "reconcile-"
)

var recAct *activities.Reconciliation

// ReconcileWorkflow runs one reconciliation (docs/spec.md#reconciliation). The Temporal
// Schedule ReconcileScheduleID starts it periodically (overlap: skip), and
// `seckill reconcile run` on demand. Two at once are harmless: every repair
// has a fixed repair_id.
func ReconcileWorkflow(ctx workflow.Context, in steps.ReconcileInput) (steps.ReconcileSummary, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
	})
	var s steps.ReconcileSummary
	err := workflow.ExecuteActivity(ctx, recAct.Reconcile, in).Get(ctx, &s)
	return s, err
}
