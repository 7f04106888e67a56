package activities

import (
	"context"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// CreateOrder runs the order transaction (orders.Store.Create): inbox first,
// conditional stock, one order per user, outbox, commit-unknown resolution.
func (a *Activities) CreateOrder(ctx context.Context, m events.OrderCreateRequested) (steps.CreateOrderResult, error) {
	return a.orders.Create(ctx, m)
}

// RejectOverdue durably rejects a reservation past its business deadline
// (inventory.Store.RejectOverdue) and returns its status afterwards.
func (a *Activities) RejectOverdue(ctx context.Context, in inventory.RejectInput) (state.Reservation, error) {
	return a.inv.RejectOverdue(ctx, in)
}

// RejectUnprocessable durably rejects a reservation whose order transaction
// failed for good (inventory.Store.RejectUnprocessable) and returns its
// status afterwards; a message PostgreSQL cannot record is refused for good
// (ErrTypeRefused).
func (a *Activities) RejectUnprocessable(ctx context.Context, in steps.UnprocessableInput) (state.Reservation, error) {
	st, err := a.inv.RejectUnprocessable(ctx, in)
	return st, refused(err, inventory.ErrNoDecision)
}
