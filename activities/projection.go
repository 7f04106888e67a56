package activities

import (
	"context"

	"github.com/seckill/seckill/state/steps"
)

// ProjectOrderCreated projects a created order onto Redis once
// (inventory.Store.ProjectOrderCreated).
func (a *Activities) ProjectOrderCreated(ctx context.Context, in steps.ProjectionInput) (steps.ProjectionResult, error) {
	return a.inv.ProjectOrderCreated(ctx, in)
}

// ReleaseRedis gives a cancelled order's unit back to Redis stock once
// (inventory.Store.ReleaseRedis). Only after PostgreSQL durably cancelled the order.
func (a *Activities) ReleaseRedis(ctx context.Context, in steps.ReleaseInput) (steps.ProjectionResult, error) {
	return a.inv.ReleaseRedis(ctx, in)
}
