// Package paysim is a payment provider simulator: the one external system the
// flash-sale project does not own, shipped as a small HTTP service so that
// payment-versus-cancel races can be produced on purpose.
//
// It behaves like a real provider: it keeps its own state (in memory), answers
// queries, closes unpaid payments, refunds paid ones, and sends signed
// callbacks (Standard Webhooks style, see Sign and Verify) to the merchant,
// retrying with backoff until a 2xx acknowledges them.
//
// The package has three parts: Server (the provider, usable in-process via
// Handler or served by `seckill-dev paysim`), Client (what the merchant side calls)
// and Sign/Verify (the webhook signature, shared by both sides).
package paysim

import (
	"regexp"
	"time"

	"github.com/google/uuid"
)

// Status is the provider's state of a payment.
type Status string

// The provider's payment states. PENDING → PAID → REFUNDED, or PENDING → CLOSED.
const (
	StatusPending  Status = "PENDING"
	StatusPaid     Status = "PAID"
	StatusClosed   Status = "CLOSED"
	StatusRefunded Status = "REFUNDED"
)

// Payment is the provider's record of one payment, as the API returns it.
type Payment struct {
	TransactionID   string    `json:"transaction_id"`
	MerchantOrderID uuid.UUID `json:"merchant_order_id"`
	AmountCents     int64     `json:"amount_cents"`
	Currency        string    `json:"currency"`
	Status          Status    `json:"status"`
	// PayURL is where the user "pays" (relative to the provider's base URL).
	PayURL      string     `json:"pay_url,omitempty"`
	CallbackURL string     `json:"callback_url,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	PaidAt      *time.Time `json:"paid_at,omitempty"`
	ClosedAt    *time.Time `json:"closed_at,omitempty"`
	RefundedAt  *time.Time `json:"refunded_at,omitempty"`
	RefundID    string     `json:"refund_id,omitempty"`
	// RefundAmountCents is the refunded amount (always the full amount).
	RefundAmountCents int64 `json:"refund_amount_cents,omitempty"`
}

// EventPaymentSucceeded is the type of the callback sent when a payment is paid.
const EventPaymentSucceeded = "payment.succeeded"

// Event is the JSON body of a callback.
type Event struct {
	Type            string    `json:"type"`
	EventID         string    `json:"event_id"`
	TransactionID   string    `json:"transaction_id"`
	MerchantOrderID uuid.UUID `json:"merchant_order_id"`
	AmountCents     int64     `json:"amount_cents"`
	Currency        string    `json:"currency"`
	PaidAt          time.Time `json:"paid_at"`
}

// currencyCode is the form of an ISO 4217 alphabetic code the provider accepts.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// PayOptions shape the callbacks of a simulated user payment.
type PayOptions struct {
	// CallbackDelayMS delays the first delivery of payment.succeeded.
	CallbackDelayMS int64 `json:"callback_delay_ms,omitempty"`
	// Duplicates adds that many extra deliveries of the same event (same
	// webhook-id, same body), a few milliseconds apart; each retries on its own.
	Duplicates int `json:"duplicates,omitempty"`
	// Reorder sends the duplicates right away, before the delayed first
	// delivery is due.
	Reorder bool `json:"reorder,omitempty"`
}

// Stats are the provider's counters (GET /v1/stats).
type Stats struct {
	// Payments counts payments by status; every status is present.
	Payments  map[Status]int `json:"payments"`
	Callbacks CallbackStats  `json:"callbacks"`
}

// CallbackStats count callback work. A delivery is one copy of an event (the
// first plus each duplicate) that is retried until acknowledged or given up.
type CallbackStats struct {
	Events     int64 `json:"events"`     // events created
	Deliveries int64 `json:"deliveries"` // deliveries scheduled (1 + duplicates per event)
	Sent       int64 `json:"sent"`       // HTTP attempts made
	Acked      int64 `json:"acked"`      // attempts answered 2xx (= deliveries acknowledged)
	Failed     int64 `json:"failed"`     // attempts answered non-2xx or failed in transport
	GivenUp    int64 `json:"given_up"`   // deliveries that used up MaxCallbackAttempts
	InFlight   int64 `json:"in_flight"`  // deliveries neither acknowledged nor given up
}
