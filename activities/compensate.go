package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/state/steps"
)

// Compensate gives a rejected reservation's unit back to Redis exactly once
// (inventory.Store.Compensate), the task's lease owned by this attempt.
// A reservation PostgreSQL holds no rejection for is refused for good
// (ErrTypeRefused): the saga takes it to manual review instead of retrying.
func (a *Activities) Compensate(ctx context.Context, in steps.CompensateInput) (steps.CompensateResult, error) {
	res, err := a.inv.Compensate(ctx, in, leaseOwner(ctx, in.ReservationID))
	return res, refused(err, inventory.ErrNotCompensable)
}

// ErrTypeRefused is the type of the non-retryable application error of a
// business refusal: the step's input names something the stores will never
// accept (nothing to compensate, a reservation PostgreSQL cannot record).
// The workflows branch on it (errors.As, Type()).
const ErrTypeRefused = "BusinessRefusal"

// refused turns err into a non-retryable ErrTypeRefused when it is one of
// the refusals given; any other error is returned as it is (and classified
// by the worker's interceptor).
func refused(err error, refusals ...error) error {
	for _, r := range refusals {
		if errors.Is(err, r) {
			return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeRefused, err)
		}
	}
	return err
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
