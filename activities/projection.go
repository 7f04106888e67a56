package activities

import (
	"context"

	"github.com/seckill/seckill/internal/inventory"
)

type (
	// ProjectionInput names a created order to project onto Redis.
	ProjectionInput = inventory.ProjectionInput
	// ProjectionResult is order_created.lua's (or release.lua's) answer.
	ProjectionResult = inventory.ProjectionResult
	// ReleaseInput names a cancelled order whose Redis unit is given back.
	ReleaseInput = inventory.ReleaseInput
)

// ProjectOrderCreated projects a created order onto Redis once
// (inventory.Store.ProjectOrderCreated).
func (a *Activities) ProjectOrderCreated(ctx context.Context, in ProjectionInput) (ProjectionResult, error) {
	return a.inv.ProjectOrderCreated(ctx, in)
}

// ReleaseRedis gives a cancelled order's unit back to Redis stock once
// (inventory.Store.ReleaseRedis). Only after PostgreSQL durably cancelled the order.
func (a *Activities) ReleaseRedis(ctx context.Context, in ReleaseInput) (ProjectionResult, error) {
	return a.inv.ReleaseRedis(ctx, in)
}
