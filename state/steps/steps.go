// Package steps holds what crosses the Temporal boundary: the inputs and
// results of the activities the workflows run and read (docs/architecture.md,
// "Layers and rules"). The domain stores return these types, activities/
// passes them on, workflows/ reads them; the package depends on no database
// or Redis client, so workflow code stays deterministic.
package steps

import (
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/state"
)

// OrderOutcome is the business result of the order transaction (CreateOrder).
type OrderOutcome string

// Outcomes of CreateOrder. None of them is an error: they are decisions.
// Three are spelled as the reservation status they leave (variables: a
// state status has no constant).
var (
	// OutcomeCreated: the order exists (now, or from an earlier delivery).
	OutcomeCreated = OrderOutcome(state.ReservationOrderCreated.String())
	// OutcomeRejected: PostgreSQL durably rejected the reservation
	// (ORDER_REJECTED + compensation_task + outbox in one transaction).
	OutcomeRejected = OrderOutcome(state.ReservationOrderRejected.String())
	// OutcomeLate: the reservation was already compensated or cancelled
	// before this message: no order, no second compensation.
	OutcomeLate OrderOutcome = "LATE_AFTER_COMPENSATION"
	// OutcomeManual: automation cannot decide (e.g. same message_id with a
	// different payload, or the reservation is under manual review).
	OutcomeManual = OrderOutcome(state.ReservationManualReview.String())
)

// CreateOrderResult is what CreateOrder decided.
type CreateOrderResult struct {
	Outcome   OrderOutcome
	OrderID   uuid.UUID
	ExpiresAt time.Time
	Reason    string
	// Duplicate is true when the inbox already held this message: the result
	// is the one recorded by the first processing.
	Duplicate bool
}

// Rejection reasons recorded in inventory_reservation.reason_code.
const (
	ReasonDeadline        = "BUSINESS_DEADLINE_EXCEEDED"
	ReasonStockExhausted  = "STOCK_EXHAUSTED"
	ReasonDuplicateOrder  = "DUPLICATE_ORDER"
	ReasonPayloadConflict = "PAYLOAD_CONFLICT"
	ReasonUnknownSKU      = "UNKNOWN_SKU"
	// ReasonUserCap: the user held the sale's max_per_user reservations
	// (docs/spec.md#user-cap).
	ReasonUserCap = "USER_CAP_REACHED"
	// ReasonUnprocessable: the order transaction failed for good (a
	// permanent database error); recorded as ORDER_UNPROCESSABLE:<detail>.
	ReasonUnprocessable = "ORDER_UNPROCESSABLE"
)

// UnprocessableInput names a reservation whose order transaction failed for
// good, and why.
type UnprocessableInput struct {
	Message events.OrderCreateRequested
	// Detail says what refused it (an SQLSTATE, an error type), at most
	// 40 characters: it becomes part of the reason code.
	Detail string
}

// CompensateInput names the reservation whose Redis unit is given back.
type CompensateInput struct {
	ReservationID uuid.UUID
	ActivityID    int64
	SKUID         int64
	// Bucket is the SKU's stock bucket the unit was taken from (the
	// message's; 0 for a SKU of one bucket).
	Bucket int `json:",omitempty"`
}

// CompensateResult is the end of one compensation attempt.
type CompensateResult struct {
	// Status is the reservation's status afterwards: COMPENSATED or MANUAL_REVIEW.
	Status state.Reservation
	// LuaCode is compensate.lua's return code (1, 2, -1..-5), 0 if it did not run.
	LuaCode int64
	Reason  string
}

// ProjectionInput names a created order to project onto Redis.
type ProjectionInput struct {
	ReservationID uuid.UUID
	OrderID       uuid.UUID
	ActivityID    int64
	SKUID         int64
	Bucket        int `json:",omitempty"` // the SKU's stock bucket (the message's)
}

// ProjectionResult is order_created.lua's (or release.lua's) answer.
type ProjectionResult struct {
	Code int64
	Text string
}

// ReleaseInput names a cancelled order whose Redis unit is given back.
type ReleaseInput struct {
	ReservationID uuid.UUID
	OrderID       uuid.UUID
	ActivityID    int64
	SKUID         int64
	Bucket        int `json:",omitempty"` // the SKU's stock bucket (the message's)
}

// ReservationState is where a reservation stands in PostgreSQL: what a saga
// resumed after its predecessor was lost carries on from.
type ReservationState struct {
	// Status is the reservation's status; none when PostgreSQL has no row.
	Status  state.Reservation
	Reason  string
	OrderID uuid.UUID
	// OrderStatus and ExpiresAt are set when the reservation has an order.
	OrderStatus state.Order
	ExpiresAt   time.Time
}
