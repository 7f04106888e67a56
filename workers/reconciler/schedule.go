// Package reconciler keeps the Temporal Schedule that runs reconciliation.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// EnsureSchedule creates the reconciliation Schedule (every `every`, overlap
// skip) unless it exists. It is safe to call from every worker at start.
func EnsureSchedule(ctx context.Context, c client.Client, taskQueue string, every time.Duration) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      workflows.ReconcileScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		Overlap: enums.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:        workflows.ReconcileWorkflowIDPrefix + "scheduled",
			Workflow:  workflows.ReconcileWorkflow,
			Args:      []any{steps.ReconcileInput{}},
			TaskQueue: taskQueue,
		},
		Note: "seckill reconciliation (docs/operations.md)",
	})
	if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", workflows.ReconcileScheduleID, err)
	}
	return nil
}
