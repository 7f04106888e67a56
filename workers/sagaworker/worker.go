// Package sagaworker is the Temporal worker that runs ReservationSaga and its
// activities.
package sagaworker

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/workflows"
)

// Register adds the saga, refund and (with rec) reconciliation workflows and their activities to r.
func Register(r worker.Registry, acts *activities.Activities, rec *activities.Reconciliation) {
	r.RegisterWorkflow(workflows.ReservationSaga)
	r.RegisterWorkflow(workflows.RefundWorkflow)
	r.RegisterActivity(acts)
	if rec != nil {
		r.RegisterWorkflow(workflows.ReconcileWorkflow)
		r.RegisterActivity(rec)
	}
}

// RegisterBulkRepair adds the bulk repair workflow and its activities to r.
func RegisterBulkRepair(r worker.Registry, bulk *activities.BulkRepair) {
	r.RegisterWorkflow(workflows.BulkRepairWorkflow)
	r.RegisterActivity(bulk)
}

// New builds a worker on taskQueue whose concurrent activities are bounded
// by maxActivities (keep it within the PostgreSQL pool) and
// whose activities are watched and their errors classified as ao says
// (temporalx.ActivityInterceptor).
func New(c client.Client, taskQueue string, acts *activities.Activities, rec *activities.Reconciliation, maxActivities int,
	ao temporalx.InterceptorOptions) (worker.Worker, error) {
	w, err := temporalx.NewWorker(c, taskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     maxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: 64,
	}, ao)
	if err != nil {
		return nil, err
	}
	Register(w, acts, rec)
	return w, nil
}
