package activities

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"github.com/seckill/seckill/internal/inventory"
)

type (
	// CompensateInput names the reservation whose Redis unit is given back.
	CompensateInput = inventory.CompensateInput
	// CompensateResult is the end of one compensation attempt.
	CompensateResult = inventory.CompensateResult
)

// ErrLeaseHeld means another attempt holds the compensation task's lease;
// the activity retries after it expires.
var ErrLeaseHeld = inventory.ErrLeaseHeld

// Compensate gives a rejected reservation's unit back to Redis exactly once
// (inventory.Store.Compensate), the task's lease owned by this attempt.
func (a *Activities) Compensate(ctx context.Context, in CompensateInput) (CompensateResult, error) {
	return a.inv.Compensate(ctx, in, leaseOwner(ctx, in.ReservationID))
}

// leaseOwner names this attempt: the Temporal activity attempt when run by a
// worker, a fresh id otherwise (tests calling the method directly).
func leaseOwner(ctx context.Context, rid uuid.UUID) string {
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		return fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.RunID, info.ActivityID, info.Attempt)
	}
	return "direct/" + uuid.NewString()
}
