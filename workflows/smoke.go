package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
)

// Smoke is the stack check's workflow: one activity, its result returned. It
// proves a worker, the server and its persistence work end to end.
func Smoke(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var a *activities.Smoke
	var out string
	err := workflow.ExecuteActivity(ctx, a.Greet, name).Get(ctx, &out)
	return out, err
}
