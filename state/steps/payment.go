package steps

import (
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/state"
)

// Evidence is a provider's proof that an order was paid.
type Evidence struct {
	OrderID       uuid.UUID
	Provider      string
	TransactionID string
	AmountCents   int64
	// Currency is the ISO 4217 code the provider reported. Empty only in
	// evidence a saga history recorded before payments carried a currency;
	// the callback and the provider adapters always set it.
	Currency string
	PaidAt   time.Time
}

// RecordOutcome is what recording a payment did.
type RecordOutcome string

// Outcomes of recording a payment.
const (
	// RecordPaid: this evidence moved the order to PAID now.
	RecordPaid RecordOutcome = "PAID"
	// RecordAlreadyPaid: the order was PAID before (a duplicate callback).
	RecordAlreadyPaid RecordOutcome = "ALREADY_PAID"
	// RecordPaidAfterCancel: the order was CANCELLED; the payment is recorded
	// and must be refunded (never lost, never turned into an order).
	RecordPaidAfterCancel RecordOutcome = "PAID_AFTER_CANCEL"
	// RecordAlreadyRefunding: the late payment is already being refunded.
	RecordAlreadyRefunding RecordOutcome = "ALREADY_REFUNDING"
	// RecordDuplicatePayment: the order was paid by another payment; this one
	// is recorded and owed back (at most one successful payment per order).
	RecordDuplicatePayment RecordOutcome = "DUPLICATE_PAYMENT"
)

// RecordResult says what recording a payment did.
type RecordResult struct {
	Outcome       RecordOutcome
	PaymentID     uuid.UUID
	OrderStatus   state.Order
	ReservationID uuid.UUID
	ActivityID    int64
	SKUID         int64
}

// CloseOutcome is what closing an order's payment at the provider found.
type CloseOutcome string

// Close outcomes.
const (
	CloseClosed    CloseOutcome = "CLOSED"     // the provider closed the unpaid payment
	CloseNoPayment CloseOutcome = "NO_PAYMENT" // the provider never saw a payment for the order
	ClosePaid      CloseOutcome = "PAID"       // the provider says it was paid: record it, never cancel
)

// CloseResult is what the provider said when asked to close.
type CloseResult struct {
	Outcome  CloseOutcome
	Evidence Evidence
}

// Refund is a payment to give back (the refund workflow's step input).
type Refund struct {
	PaymentID     uuid.UUID
	OrderID       uuid.UUID
	Provider      string
	TransactionID string
	AmountCents   int64
}
