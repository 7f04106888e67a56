package activities

import (
	"context"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/state"
)

// The order step's vocabulary is the order store's (internal/orders); the
// names are repeated here because the workflows speak of activities.
type (
	// Outcome is the business result of CreateOrder.
	Outcome = orders.Outcome
	// CreateOrderResult is what CreateOrder decided.
	CreateOrderResult = orders.CreateResult
	// RejectInput names a reservation reconciliation found past its deadline.
	RejectInput = inventory.RejectInput
	// UnprocessableInput names a reservation whose order transaction failed for good.
	UnprocessableInput = inventory.UnprocessableInput
)

// Outcomes of CreateOrder (orders.Outcome*).
var (
	OutcomeCreated  = orders.OutcomeCreated
	OutcomeRejected = orders.OutcomeRejected
	OutcomeLate     = orders.OutcomeLate
	OutcomeManual   = orders.OutcomeManual
)

// Rejection reasons recorded in inventory_reservation.reason_code.
const (
	ReasonDeadline        = inventory.ReasonDeadline
	ReasonStockExhausted  = inventory.ReasonStockExhausted
	ReasonDuplicateOrder  = inventory.ReasonDuplicateOrder
	ReasonPayloadConflict = inventory.ReasonPayloadConflict
	ReasonUnknownSKU      = inventory.ReasonUnknownSKU
	ReasonUnprocessable   = inventory.ReasonUnprocessable
)

// ErrCommitUnknown marks a commit whose outcome could not be established; the
// activity is retried with the same message_id, never compensated (docs/spec.md#commit-unknown).
var ErrCommitUnknown = orders.ErrCommitUnknown

// PayloadHash is the inbox hash of a message: SHA-256 of its business bytes.
func PayloadHash(m events.OrderCreateRequested) []byte { return inbox.PayloadHash(m) }

// OrderID is the fixed order id of a reservation.
func OrderID(reservationID uuid.UUID) uuid.UUID { return orders.ID(reservationID) }

// CompensationKey is the fixed idempotency key (and Redis compensation id)
// of a reservation's Redis release.
func CompensationKey(rid uuid.UUID) string { return inventory.CompensationKey(rid) }

// CreateOrder runs the order transaction (orders.Store.Create): inbox first,
// conditional stock, one order per user, outbox, commit-unknown resolution.
func (a *Activities) CreateOrder(ctx context.Context, m events.OrderCreateRequested) (CreateOrderResult, error) {
	return a.orders.Create(ctx, m)
}

// RejectOverdue durably rejects a reservation past its business deadline
// (inventory.Store.RejectOverdue) and returns its status afterwards.
func (a *Activities) RejectOverdue(ctx context.Context, in RejectInput) (state.Reservation, error) {
	return a.inv.RejectOverdue(ctx, in)
}

// RejectUnprocessable durably rejects a reservation whose order transaction
// failed for good (inventory.Store.RejectUnprocessable) and returns its
// status afterwards; a message PostgreSQL cannot record is refused for good
// (ErrTypeRefused).
func (a *Activities) RejectUnprocessable(ctx context.Context, in UnprocessableInput) (state.Reservation, error) {
	st, err := a.inv.RejectUnprocessable(ctx, in)
	return st, refused(err, inventory.ErrNoDecision)
}
