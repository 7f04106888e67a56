package state

// Saga is a reservation saga's status (SagaState.Status and the
// ReservationStatus search attribute of workflows/): where the reservation
// stands, then, once it has an order, where the order stands, plus two of
// the saga's own (SagaLate, SagaResolved). A saga status has no column; the
// sagas' histories and search attributes hold its text.
type Saga struct{ code }

// Saga statuses. Every reservation and order status is one
// (ReservationSaga, OrderSaga); these are the ones the saga names.
var (
	SagaReserved      = ReservationSaga(ReservationReserved)
	SagaOrderCreated  = ReservationSaga(ReservationOrderCreated)
	SagaRejected      = ReservationSaga(ReservationOrderRejected)
	SagaCompensated   = ReservationSaga(ReservationCompensated)
	SagaManual        = ReservationSaga(ReservationManualReview)
	SagaCancelPending = OrderSaga(OrderCancelPending)
	SagaPaid          = OrderSaga(OrderPaid)
	SagaCancelled     = OrderSaga(OrderCancelled)
	SagaRefunding     = OrderSaga(OrderRefunding)
	SagaRefunded      = OrderSaga(OrderRefunded)
	// SagaLate: CreateOrder found a durable decision taken before its message.
	SagaLate = Saga{code{"LATE_AFTER_COMPENSATION"}}
	// SagaResolved: an operator marked the reservation resolved by hand.
	SagaResolved = Saga{code{"RESOLVED_MANUALLY"}}
)

// ReservationSaga is the saga status of a reservation in status r.
func ReservationSaga(r Reservation) Saga { return Saga{r.code} }

// OrderSaga is the saga status of a reservation whose order is in status o.
// ORDER_CREATED (a reservation's) and CREATED (an order's) differ; CANCELLED
// is both a reservation's and an order's, the same saga status.
func OrderSaga(o Order) Saga { return Saga{o.code} }

// sagas lists every saga status.
func sagas() []Saga {
	out := []Saga{SagaLate, SagaResolved}
	for _, r := range ReservationMoves.States {
		out = append(out, ReservationSaga(r))
	}
	for _, o := range OrderMoves.States {
		if o != OrderCancelled { // the reservation's CANCELLED, listed above
			out = append(out, OrderSaga(o))
		}
	}
	return out
}

// ParseSaga returns the saga status spelled s.
func ParseSaga(s string) (Saga, error) { return parse("saga", sagas(), s) }

// UnmarshalText decodes a saga status ("": none).
func (g *Saga) UnmarshalText(b []byte) error { return unmarshal(g, ParseSaga, b) }

// Cancel is the answer to beginning an order's cancel: the order's status
// afterwards (CANCEL_PENDING when the cancel began), or
// CancelPaymentStarting while the buyer is starting a payment at the
// provider (not an orders.status value): the cancel waits for it, so no
// provider transaction appears after it.
type Cancel struct{ code }

// CancelPaymentStarting: the cancel must wait for a payment being started.
var CancelPaymentStarting = Cancel{code{"PAYMENT_STARTING"}}

// CancelFound is the answer that the order is in status o.
func CancelFound(o Order) Cancel { return Cancel{o.code} }

// Order is the order status answered (zero for CancelPaymentStarting).
func (c Cancel) Order() Order {
	if c == CancelPaymentStarting {
		return Order{}
	}
	return Order{c.code}
}

// ParseCancel returns the cancel answer spelled s.
func ParseCancel(s string) (Cancel, error) {
	all := []Cancel{CancelPaymentStarting}
	for _, o := range OrderMoves.States {
		all = append(all, CancelFound(o))
	}
	return parse("cancel answer", all, s)
}

// UnmarshalText decodes a cancel answer ("": none).
func (c *Cancel) UnmarshalText(b []byte) error { return unmarshal(c, ParseCancel, b) }
