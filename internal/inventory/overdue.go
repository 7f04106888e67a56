package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// RejectInput names a reservation reconciliation found past its deadline.
type RejectInput struct {
	ReservationID uuid.UUID
	// Grace is how long past business_deadline the reservation must be.
	Grace time.Duration
	// Unseen, when set, is the reservation as Redis holds it, for one that
	// PostgreSQL may never have seen (its message never reached CreateOrder):
	// its row is recorded from it first, so that the rejection is durable and
	// a message arriving later finds it.
	Unseen *events.OrderCreateRequested
}

var errNotOverdue = errors.New("reservation not past its deadline yet")

// RejectOverdue durably rejects a reservation that is still RESERVED in
// PostgreSQL (or not there at all, see RejectInput.Unseen) past its business
// deadline (docs/spec.md#business-deadline): ORDER_REJECTED with BUSINESS_DEADLINE_EXCEEDED,
// its compensation task and outbox event, in one transaction, by CAS. A
// message arriving later finds the rejection and creates no order. It returns
// the reservation's status afterwards.
func (s *Store) RejectOverdue(ctx context.Context, in RejectInput) (state.Reservation, error) {
	if in.Unseen != nil {
		if err := in.Unseen.Validate(); err != nil {
			return state.Reservation{}, fmt.Errorf("reject %s: %w", in.ReservationID, err)
		}
		if in.Unseen.ReservationID != in.ReservationID {
			return state.Reservation{}, fmt.Errorf("reject %s: the Redis reservation is %s", in.ReservationID, in.Unseen.ReservationID)
		}
	}
	var status state.Reservation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		status, err = rejectOverdueTx(ctx, tx, in)
		return err
	})
	if errors.Is(err, errNotOverdue) {
		return state.ReservationReserved, nil
	}
	if err == nil && status == state.ReservationOrderRejected {
		s.log.InfoContext(ctx, "order.rejected", "reservation_id", in.ReservationID, "reason", steps.ReasonDeadline)
	}
	return status, err
}

func rejectOverdueTx(ctx context.Context, tx pgx.Tx, in RejectInput) (state.Reservation, error) {
	if m := in.Unseen; m != nil {
		if err := Record(ctx, tx, *m); err != nil {
			return state.Reservation{}, err
		}
	}
	var status state.Reservation
	var sub Subject
	var overdue bool
	err := tx.QueryRow(ctx, `
		SELECT status, activity_id, sku_id, business_deadline < clock_timestamp() - $2::interval
		FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE`, in.ReservationID, in.Grace.String()).
		Scan(&status, &sub.ActivityID, &sub.SKUID, &overdue)
	if err != nil {
		return state.Reservation{}, fmt.Errorf("lock reservation %s: %w", in.ReservationID, err)
	}
	reject, err := overdueVerdict(status, overdue, in.Unseen != nil)
	if err != nil {
		return state.Reservation{}, err
	}
	if !reject {
		return status, nil
	}
	sub.ReservationID = in.ReservationID
	if err := Reject(ctx, tx, sub, steps.ReasonDeadline); err != nil {
		return state.Reservation{}, err
	}
	return state.ReservationOrderRejected, nil
}

// overdueVerdict decides RejectOverdue's move for a reservation locked in
// status: reject only a RESERVED one past its deadline (overdue). A RESERVED
// one not overdue yet that reconciliation recorded from Redis (unseen) is
// errNotOverdue: its transaction rolls back, leaving no row behind
// (CreateOrder records it when the message comes). Any other is left as it is.
func overdueVerdict(status state.Reservation, overdue, unseen bool) (reject bool, err error) {
	if status == state.ReservationReserved && !overdue && unseen {
		return false, errNotOverdue
	}
	return status == state.ReservationReserved && overdue, nil
}
