package activities

import (
	"context"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state/steps"
)

// LoadReservation reads a reservation and its order.
func (a *Activities) LoadReservation(ctx context.Context, rid uuid.UUID) (steps.ReservationState, error) {
	return a.inv.Load(ctx, rid)
}

// ReservationMessage rebuilds a reservation's ORDER_CREATE_REQUESTED from
// PostgreSQL (inventory.Message): what a resumed saga needs, never an order source.
func ReservationMessage(ctx context.Context, db pg.Querier, rid uuid.UUID) (events.OrderCreateRequested, error) {
	return inventory.Message(ctx, db, rid)
}
