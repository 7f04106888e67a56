// Package sagaworker is the Temporal worker that runs ReservationSaga and its
// activities.
package sagaworker

import (
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/temporalx"
	"github.com/seckill/seckill/workflows"
)

// Register adds the saga, refund and (with rec) reconciliation workflows and their activities to r.
func Register(r worker.Registry, acts *activities.Activities, rec *reconcile.Activities) {
	r.RegisterWorkflow(workflows.ReservationSaga)
	r.RegisterWorkflow(workflows.RefundWorkflow)
	r.RegisterActivity(acts)
	if rec != nil {
		r.RegisterWorkflow(workflows.ReconcileWorkflow)
		r.RegisterActivity(rec)
	}
}

// New builds a worker on taskQueue whose concurrent activities are bounded
// by maxActivities (keep it within the PostgreSQL pool: seed §11.3).
func New(c client.Client, taskQueue string, acts *activities.Activities, rec *reconcile.Activities, maxActivities int) worker.Worker {
	w := temporalx.NewWorker(c, taskQueue, worker.Options{
		MaxConcurrentActivityExecutionSize:     maxActivities,
		MaxConcurrentWorkflowTaskExecutionSize: 64,
	})
	Register(w, acts, rec)
	return w
}
