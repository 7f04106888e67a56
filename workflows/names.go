// Package workflows holds the Temporal workflow code of seckill. Workflow code
// is deterministic and does no I/O: every side effect is an activity in
// package activities.
package workflows

import (
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
)

// TaskQueue is the default task queue of the saga worker (config
// SECKILL_TEMPORAL_TASK_QUEUE overrides it per deployment).
const TaskQueue = "seckill-saga"

// Custom search attributes registered on the Temporal server by
// scripts/stack.sh (dev server) or `temporal operator search-attribute create`.
var (
	// SearchReservationStatus is the saga's current reservation/order status,
	// e.g. `ReservationStatus = "MANUAL_REVIEW"` in the Temporal UI.
	SearchReservationStatus = temporal.NewSearchAttributeKeyKeyword("ReservationStatus")
	// SearchActivityID is the flash-sale activity of the saga.
	SearchActivityID = temporal.NewSearchAttributeKeyInt64("ActivityId")
	// SearchSKUID is the SKU of the saga.
	SearchSKUID = temporal.NewSearchAttributeKeyInt64("SkuId")
)

// SearchAttributeNames lists the custom search attributes with their types,
// as the server must have them registered.
var SearchAttributeNames = map[string]string{
	"ReservationStatus": "Keyword",
	"ActivityId":        "Int",
	"SkuId":             "Int",
}

// Signal and query names of ReservationSaga.
const (
	// SignalRepair carries a RepairRequest from an operator (temporal workflow signal --name repair).
	SignalRepair = activities.RepairSignal
	// QueryState returns the saga's SagaState (temporal workflow query --type state).
	QueryState = "state"
	// SignalPayment tells the saga a payment was recorded (PaymentSignal).
	SignalPayment = "payment"
	// SignalCancel is the user's cancel of an unpaid order (CancelSignal).
	SignalCancel = "cancel"
)

// RefundWorkflowID is the refund workflow of one payment.
func RefundWorkflowID(paymentID string) string { return "refund-" + paymentID }

// ReservationWorkflowID is the saga's workflow ID: derived from the
// reservation_id only (no personal data), so starting twice finds the same saga.
func ReservationWorkflowID(reservationID string) string { return "reservation-" + reservationID }
