// Package sagaworker is the Temporal worker that runs ReservationSaga and its
// activities.
package sagaworker

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/workflows"
)

// The versioning behavior of each workflow type on a versioned worker
// (docs/operations.md, "Deploying the saga worker"): a saga and a refund
// finish on the build they started on; reconciliation and bulk repair,
// short-lived or continued-as-new and kept replayable by GetVersion, move
// to the current build at their next task.
var (
	Pinned      = workflow.RegisterOptions{VersioningBehavior: workflow.VersioningBehaviorPinned}
	AutoUpgrade = workflow.RegisterOptions{VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade}
)

// Register adds the saga, refund and (with rec) reconciliation workflows and their activities to r.
func Register(r worker.Registry, acts *activities.Activities, rec *activities.Reconciliation) {
	r.RegisterWorkflowWithOptions(workflows.ReservationSaga, Pinned)
	r.RegisterWorkflowWithOptions(workflows.RefundWorkflow, Pinned)
	r.RegisterActivity(acts)
	if rec != nil {
		r.RegisterWorkflowWithOptions(workflows.ReconcileWorkflow, AutoUpgrade)
		r.RegisterActivity(rec)
	}
}

// RegisterBulkRepair adds the bulk repair workflow and its activities to r.
func RegisterBulkRepair(r worker.Registry, bulk *activities.BulkRepair) {
	r.RegisterWorkflowWithOptions(workflows.BulkRepairWorkflow, AutoUpgrade)
	r.RegisterActivity(bulk)
}

// New builds a worker on taskQueue with every workflow and activity of
// Register (see NewEmpty for the options).
func New(c client.Client, taskQueue string, acts *activities.Activities, rec *activities.Reconciliation, maxActivities int,
	ao temporalx.InterceptorOptions, dep worker.DeploymentOptions) (worker.Worker, error) {
	w, err := NewEmpty(c, taskQueue, maxActivities, ao, dep)
	if err != nil {
		return nil, err
	}
	Register(w, acts, rec)
	return w, nil
}

// NewEmpty builds a worker on taskQueue with nothing registered, whose
// concurrent activities are bounded by maxActivities (keep it within the
// PostgreSQL pool), whose activities are watched and their errors
// classified as ao says (temporalx.ActivityInterceptor), and which polls as
// dep's worker deployment version (zero: unversioned).
func NewEmpty(c client.Client, taskQueue string, maxActivities int, ao temporalx.InterceptorOptions,
	dep worker.DeploymentOptions) (worker.Worker, error) {
	return temporalx.NewWorker(c, taskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     maxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: 64,
		DeploymentOptions:                      dep,
	}, ao)
}
