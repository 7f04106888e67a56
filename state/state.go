// Package state is the vocabulary of every durable status the system keeps,
// and the moves between them: one type per status column, one table of
// allowed moves per type, each move naming the one function that makes it.
// The SQL CHECK constraints of migrations/ list the same values
// (TestCheckConstraintsMatch compares them), and every conditional status
// UPDATE of the Go sources and migrations moves only from statuses its
// machine allows into its target (TestUpdatesFollowMoves reads them), so
// "where does an order become CANCELLED?" has one answer: OrderMoves.
package state

import "slices"

// Reservation is inventory_reservation.status, and the status field of a
// reservation's Redis hash (a subset: RedisReservationMoves).
type Reservation string

// Reservation statuses.
const (
	ReservationReserved      Reservation = "RESERVED"
	ReservationOrderCreated  Reservation = "ORDER_CREATED"
	ReservationOrderRejected Reservation = "ORDER_REJECTED"
	ReservationCompensating  Reservation = "COMPENSATING"
	ReservationCompensated   Reservation = "COMPENSATED"
	ReservationCancelled     Reservation = "CANCELLED"
	ReservationManualReview  Reservation = "MANUAL_REVIEW"
)

// Order is orders.status.
type Order string

// Order statuses.
const (
	OrderCreated       Order = "CREATED"
	OrderPaying        Order = "PAYING"
	OrderCancelPending Order = "CANCEL_PENDING"
	OrderPaid          Order = "PAID"
	OrderCancelled     Order = "CANCELLED"
	OrderRefunding     Order = "REFUNDING"
	OrderRefunded      Order = "REFUNDED"
)

// Payment is payment_record.status: a successful payment and its refund.
type Payment string

// Payment statuses.
const (
	PaymentSuccess   Payment = "SUCCESS"
	PaymentRefunding Payment = "REFUNDING"
	PaymentRefunded  Payment = "REFUNDED"
)

// Intent is payment_intent.status: a provider transaction this system
// created for an order.
type Intent string

// Intent statuses.
const (
	IntentCreating Intent = "CREATING"
	IntentOpen     Intent = "OPEN"
	IntentClosed   Intent = "CLOSED"
	IntentPaid     Intent = "PAID"
)

// Compensation is compensation_task.status: giving a rejected
// reservation's unit back to Redis.
type Compensation string

// Compensation task statuses.
const (
	CompensationPending Compensation = "PENDING"
	CompensationClaimed Compensation = "CLAIMED"
	CompensationRetry   Compensation = "RETRY"
	CompensationApplied Compensation = "APPLIED"
	// CompensationVerified is allowed by the CHECK constraint and read as
	// final, but nothing writes it.
	CompensationVerified Compensation = "VERIFIED"
	CompensationManual   Compensation = "MANUAL"
)

// Outbox is event_outbox.status.
type Outbox string

// Outbox statuses.
const (
	OutboxPending Outbox = "PENDING"
	OutboxSending Outbox = "SENDING"
	OutboxRetry   Outbox = "RETRY"
	OutboxSent    Outbox = "SENT"
	OutboxManual  Outbox = "MANUAL"
)

// Refund is refund_task.status: a refund owed for a payment.
type Refund string

// Refund task statuses.
const (
	RefundPending Refund = "PENDING"
	RefundStarted Refund = "STARTED"
	RefundDone    Refund = "DONE"
	// RefundManual: refused for good (HoldRefund); a person looks.
	RefundManual Refund = "MANUAL"
)

// Repair is repair_task.status.
type Repair string

// Repair task statuses.
const (
	RepairPending Repair = "PENDING"
	RepairApplied Repair = "APPLIED"
	RepairRefused Repair = "REFUSED"
	RepairManual  Repair = "MANUAL"
	RepairFailed  Repair = "FAILED"
)

// Status is any of the status types above.
type Status interface {
	~string
}

// Move is one allowed change of a status. From is "" for the status a row
// is inserted with. By names the function that makes the move, as
// "path/file.go Func" (TestMovesNameTheirFunctions checks it exists).
type Move[S Status] struct {
	From, To S
	By       string
}

// Machine is the statuses of one column and the moves between them.
type Machine[S Status] struct {
	// Table is the PostgreSQL table whose status column this is ("" for the
	// Redis reservation hash).
	Table  string
	States []S
	Moves  []Move[S]
}

// Allows reports whether a row in status from may move to to ("" from:
// inserted as to).
func (m Machine[S]) Allows(from, to S) bool {
	return slices.ContainsFunc(m.Moves, func(mv Move[S]) bool { return mv.From == from && mv.To == to })
}

// Known reports whether s is one of the machine's statuses.
func (m Machine[S]) Known(s S) bool { return slices.Contains(m.States, s) }

// Into lists the moves that end in to: where a row becomes to.
func (m Machine[S]) Into(to S) []Move[S] {
	var out []Move[S]
	for _, mv := range m.Moves {
		if mv.To == to {
			out = append(out, mv)
		}
	}
	return out
}
