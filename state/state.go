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
type Reservation struct{ code }

// Reservation statuses.
var (
	ReservationReserved      = Reservation{code{"RESERVED"}}
	ReservationOrderCreated  = Reservation{code{"ORDER_CREATED"}}
	ReservationOrderRejected = Reservation{code{"ORDER_REJECTED"}}
	ReservationCompensating  = Reservation{code{"COMPENSATING"}}
	ReservationCompensated   = Reservation{code{"COMPENSATED"}}
	ReservationCancelled     = Reservation{code{"CANCELLED"}}
	ReservationManualReview  = Reservation{code{"MANUAL_REVIEW"}}
)

// Order is orders.status.
type Order struct{ code }

// Order statuses.
var (
	OrderCreated       = Order{code{"CREATED"}}
	OrderPaying        = Order{code{"PAYING"}}
	OrderCancelPending = Order{code{"CANCEL_PENDING"}}
	OrderPaid          = Order{code{"PAID"}}
	OrderCancelled     = Order{code{"CANCELLED"}}
	OrderRefunding     = Order{code{"REFUNDING"}}
	OrderRefunded      = Order{code{"REFUNDED"}}
)

// Payment is payment_record.status: a successful payment and its refund.
type Payment struct{ code }

// Payment statuses.
var (
	PaymentSuccess   = Payment{code{"SUCCESS"}}
	PaymentRefunding = Payment{code{"REFUNDING"}}
	PaymentRefunded  = Payment{code{"REFUNDED"}}
)

// Intent is payment_intent.status: a provider transaction this system
// created for an order.
type Intent struct{ code }

// Intent statuses.
var (
	IntentCreating = Intent{code{"CREATING"}}
	IntentOpen     = Intent{code{"OPEN"}}
	IntentClosed   = Intent{code{"CLOSED"}}
	IntentPaid     = Intent{code{"PAID"}}
)

// Compensation is compensation_task.status: giving a rejected
// reservation's unit back to Redis.
type Compensation struct{ code }

// Compensation task statuses.
var (
	CompensationPending = Compensation{code{"PENDING"}}
	CompensationClaimed = Compensation{code{"CLAIMED"}}
	CompensationRetry   = Compensation{code{"RETRY"}}
	CompensationApplied = Compensation{code{"APPLIED"}}
	// CompensationVerified is allowed by the CHECK constraint and read as
	// final, but nothing writes it.
	CompensationVerified = Compensation{code{"VERIFIED"}}
	CompensationManual   = Compensation{code{"MANUAL"}}
)

// Outbox is event_outbox.status.
type Outbox struct{ code }

// Outbox statuses.
var (
	OutboxPending = Outbox{code{"PENDING"}}
	OutboxSending = Outbox{code{"SENDING"}}
	OutboxRetry   = Outbox{code{"RETRY"}}
	OutboxSent    = Outbox{code{"SENT"}}
	OutboxManual  = Outbox{code{"MANUAL"}}
)

// Refund is refund_task.status: a refund owed for a payment.
type Refund struct{ code }

// Refund task statuses.
var (
	RefundPending = Refund{code{"PENDING"}}
	RefundStarted = Refund{code{"STARTED"}}
	RefundDone    = Refund{code{"DONE"}}
	// RefundManual: refused for good (HoldRefund); a person looks.
	RefundManual = Refund{code{"MANUAL"}}
)

// Repair is repair_task.status.
type Repair struct{ code }

// Repair task statuses.
var (
	RepairPending = Repair{code{"PENDING"}}
	RepairApplied = Repair{code{"APPLIED"}}
	RepairRefused = Repair{code{"REFUSED"}}
	RepairManual  = Repair{code{"MANUAL"}}
	RepairFailed  = Repair{code{"FAILED"}}
)

// Status is any of the status types above. Each is a struct over its text,
// so a value can only be one of the package's variables, the zero value ("no
// status": a row not inserted yet, a reservation PostgreSQL does not hold)
// or the result of parsing a known text (ParseOrder, UnmarshalText, Scan).
type Status interface {
	comparable
	String() string
	IsZero() bool
}

// Move is one allowed change of a status. From is the zero status for the
// status a row is inserted with. By names the function that makes the move, as
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

// Allows reports whether a row in status from may move to to (the zero
// from: inserted as to).
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
