package state

// The moves of each status column, each with the one function that makes it.
// A move not listed here is a bug: add it here, with its function, in the
// same change that writes it.

// ReservationMoves are inventory_reservation's.
var ReservationMoves = Machine[Reservation]{
	Table: "inventory_reservation",
	States: []Reservation{ReservationReserved, ReservationOrderCreated, ReservationOrderRejected,
		ReservationCompensating, ReservationCompensated, ReservationCancelled, ReservationManualReview},
	Moves: []Move[Reservation]{
		{Reservation{}, ReservationReserved, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"}, // the order transaction, first message of a reservation
		{Reservation{}, ReservationReserved, "internal/inventory/reservation.go Record"},
		{Reservation{}, ReservationReserved, "internal/inventory/overdue.go rejectOverdueTx"}, // a reservation PostgreSQL never saw, rejected at once
		{ReservationReserved, ReservationOrderCreated, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"},
		{ReservationReserved, ReservationOrderRejected, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"},
		{ReservationReserved, ReservationOrderRejected, "internal/inventory/reservation.go Reject"}, // past the deadline (reconciliation)
		{ReservationOrderRejected, ReservationCompensating, "internal/inventory/compensate.go authorizeCompensation"},
		{ReservationCompensating, ReservationCompensated, "internal/inventory/compensate.go finishCompensation"},
		{ReservationCompensating, ReservationManualReview, "internal/inventory/compensate.go toManual"},
		{ReservationManualReview, ReservationOrderRejected, "internal/inventory/reservation.go RetryCompensation"}, // retry-compensation
		{ReservationOrderCreated, ReservationCancelled, "internal/inventory/reservation.go Cancel"},
	},
}

// RedisReservationMoves are the status field of a reservation's Redis hash.
// Redis rebuild writes a hash with PostgreSQL's status, whatever it is, and
// reconciliation's projection repair writes a missing ORDER_CREATED one.
var RedisReservationMoves = Machine[Reservation]{
	States: ReservationMoves.States,
	Moves: append([]Move[Reservation]{
		{Reservation{}, ReservationReserved, "lua/reserve.lua"},
		{ReservationReserved, ReservationOrderCreated, "lua/order_created.lua"},
		{ReservationReserved, ReservationCompensated, "lua/compensate.lua"},
		{ReservationOrderRejected, ReservationCompensated, "lua/compensate.lua"}, // after a rebuild copied it
		{ReservationCompensating, ReservationCompensated, "lua/compensate.lua"},  // after a rebuild copied it
		{ReservationOrderCreated, ReservationCancelled, "lua/release.lua"},
		{Reservation{}, ReservationOrderCreated, "internal/reconcile/reservations.go rebuildProjection"},
	}, copied(ReservationMoves.States, "internal/rebuild/rebuild.go reservations")...),
}

// copied is a hash written with each of states as PostgreSQL holds it.
func copied(states []Reservation, by string) []Move[Reservation] {
	out := make([]Move[Reservation], len(states))
	for i, s := range states {
		out[i] = Move[Reservation]{Reservation{}, s, by}
	}
	return out
}

// OrderMoves are orders'.
var OrderMoves = Machine[Order]{
	Table:  "orders",
	States: []Order{OrderCreated, OrderPaying, OrderCancelPending, OrderPaid, OrderCancelled, OrderRefunding, OrderRefunded},
	Moves: []Move[Order]{
		{Order{}, OrderCreated, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"},
		{OrderCreated, OrderPaying, "internal/orders/orders.go ToPaying"},
		{OrderPaying, OrderPaying, "internal/orders/orders.go ToPaying"}, // a second payment attempt
		{OrderCreated, OrderCancelPending, "internal/orders/orders.go BeginCancel"},
		{OrderPaying, OrderCancelPending, "internal/orders/orders.go BeginCancel"},
		{OrderCreated, OrderPaid, "internal/orders/orders.go Pay"},
		{OrderPaying, OrderPaid, "internal/orders/orders.go Pay"},
		{OrderCancelPending, OrderPaid, "internal/orders/orders.go Pay"}, // the payment won the race
		{OrderCancelPending, OrderCancelled, "internal/orders/orders.go Cancel"},
		{OrderCancelled, OrderRefunding, "internal/orders/orders.go ToRefunding"}, // a payment after the cancel
		{OrderRefunding, OrderRefunded, "internal/orders/orders.go ToRefunded"},
	},
}

// PaymentMoves are payment_record's. A second successful payment on a paid
// order is refunded too; the order stays PAID.
var PaymentMoves = Machine[Payment]{
	Table:  "payment_record",
	States: []Payment{PaymentSuccess, PaymentRefunding, PaymentRefunded},
	Moves: []Move[Payment]{
		{Payment{}, PaymentSuccess, "internal/payments/store.go RecordTx"},
		{PaymentSuccess, PaymentRefunding, "internal/payments/refund.go BeginRefund"},
		{PaymentRefunding, PaymentRefunded, "internal/payments/refund.go FinishRefund"},
	},
}

// IntentMoves are payment_intent's.
var IntentMoves = Machine[Intent]{
	Table:  "payment_intent",
	States: []Intent{IntentCreating, IntentOpen, IntentClosed, IntentPaid},
	Moves: []Move[Intent]{
		{Intent{}, IntentCreating, "internal/payments/intent.go BeginPayment"},
		{IntentCreating, IntentCreating, "internal/payments/intent.go BeginPayment"}, // the buyer asks again
		{IntentOpen, IntentCreating, "internal/payments/intent.go BeginPayment"},
		{IntentClosed, IntentCreating, "internal/payments/intent.go BeginPayment"},
		{IntentCreating, IntentOpen, "internal/payments/intent.go OpenPayment"},
		{IntentCreating, IntentClosed, "internal/payments/intent.go OpenPayment"}, // the order left PAYING meanwhile
		{IntentOpen, IntentOpen, "internal/payments/intent.go SettleIntent"},
		{IntentOpen, IntentClosed, "internal/payments/intent.go SettleIntent"},
		{IntentCreating, IntentClosed, "internal/payments/cancel.go FinalCancel"},
		{IntentOpen, IntentClosed, "internal/payments/cancel.go FinalCancel"},
		{IntentOpen, IntentPaid, "internal/payments/store.go payOrder"},
		{IntentClosed, IntentPaid, "internal/payments/store.go payOrder"}, // paid after the close: refunded by the order's moves
	},
}

// CompensationMoves are compensation_task's.
var CompensationMoves = Machine[Compensation]{
	Table: "compensation_task",
	States: []Compensation{CompensationPending, CompensationClaimed, CompensationRetry, CompensationApplied,
		CompensationVerified, CompensationManual},
	Moves: []Move[Compensation]{
		{Compensation{}, CompensationPending, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"},
		{Compensation{}, CompensationPending, "internal/inventory/reservation.go Reject"}, // past the deadline (reconciliation)
		{CompensationPending, CompensationClaimed, "internal/inventory/compensate.go claimTask"},
		{CompensationRetry, CompensationClaimed, "internal/inventory/compensate.go claimTask"},
		{CompensationClaimed, CompensationClaimed, "internal/inventory/compensate.go claimTask"}, // its lease ran out
		{CompensationClaimed, CompensationApplied, "internal/inventory/compensate.go finishCompensation"},
		{CompensationApplied, CompensationApplied, "internal/inventory/compensate.go finishCompensation"},
		{CompensationClaimed, CompensationManual, "internal/inventory/compensate.go toManual"},
		{CompensationManual, CompensationRetry, "internal/inventory/reservation.go RetryCompensation"}, // retry-compensation
	},
}

// OutboxMoves are event_outbox's.
var OutboxMoves = Machine[Outbox]{
	Table:  "event_outbox",
	States: []Outbox{OutboxPending, OutboxSending, OutboxRetry, OutboxSent, OutboxManual},
	Moves: []Move[Outbox]{
		{Outbox{}, OutboxPending, "internal/outbox/outbox.go Insert"},
		{Outbox{}, OutboxPending, "migrations/00012_create_order_no_failpoints.sql seckill_create_order"}, // ORDER_CREATED, RESERVATION_COMPENSATE_REQUIRED
		{OutboxPending, OutboxSending, "internal/outbox/relay.go Claim"},
		{OutboxRetry, OutboxSending, "internal/outbox/relay.go Claim"},
		{OutboxSending, OutboxSending, "internal/outbox/relay.go Claim"}, // its lease ran out
		{OutboxSending, OutboxSent, "internal/outbox/relay.go MarkSent"},
		{OutboxSending, OutboxRetry, "internal/outbox/relay.go MarkFailed"},
		{OutboxSending, OutboxManual, "internal/outbox/relay.go MarkFailed"},  // out of attempts
		{OutboxSending, OutboxRetry, "internal/outbox/relay.go RetryExpired"}, // reconciliation,
	},
}

// RefundMoves are refund_task's.
var RefundMoves = Machine[Refund]{
	Table:  "refund_task",
	States: []Refund{RefundPending, RefundStarted, RefundDone, RefundManual},
	Moves: []Move[Refund]{
		{Refund{}, RefundPending, "internal/payments/refund.go oweRefund"},
		{Refund{}, RefundPending, "internal/payments/refundtask.go OweRefundNow"}, // reconciliation,
		{RefundPending, RefundStarted, "internal/payments/refundtask.go RefundStarted"},
		{RefundPending, RefundDone, "internal/payments/refund.go FinishRefund"},
		{RefundStarted, RefundDone, "internal/payments/refund.go FinishRefund"},
		{RefundManual, RefundDone, "internal/payments/refund.go FinishRefund"}, // held, settled with the provider by hand (docs/operations.md#refund-backlog)
		{RefundPending, RefundManual, "internal/payments/refund.go HoldRefund"},
		{RefundStarted, RefundManual, "internal/payments/refund.go HoldRefund"},
	},
}

// RepairMoves are repair_task's.
var RepairMoves = Machine[Repair]{
	Table:  "repair_task",
	States: []Repair{RepairPending, RepairApplied, RepairRefused, RepairManual, RepairFailed},
	Moves: []Move[Repair]{
		{Repair{}, RepairApplied, "internal/repairs/manual.go Apply"},
		{Repair{}, RepairRefused, "internal/repairs/manual.go Apply"},
		{Repair{}, RepairPending, "internal/repairs/repairs.go Claim"},
		{Repair{}, RepairManual, "internal/repairs/repairs.go Claim"},
		{RepairFailed, RepairPending, "internal/repairs/repairs.go Claim"},  // retried by a later run
		{RepairPending, RepairPending, "internal/repairs/repairs.go Claim"}, // stale, taken over
		{RepairPending, RepairApplied, "internal/repairs/repairs.go Finish"},
		{RepairPending, RepairFailed, "internal/repairs/repairs.go Finish"},
	},
}
