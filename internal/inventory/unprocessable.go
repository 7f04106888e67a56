package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// ErrNoDecision means PostgreSQL cannot record a reservation at all: the
// caller has no durable decision to build on (manual review).
var ErrNoDecision = errors.New("reservation cannot be recorded in PostgreSQL")

// RejectUnprocessable durably rejects a reservation whose order transaction
// can never pass (the saga got a permanent error from CreateOrder): the
// reservation row recorded from the message if PostgreSQL does not hold it,
// then RESERVED → ORDER_REJECTED with reason ORDER_UNPROCESSABLE:<detail>,
// its compensation task and outbox event, in one transaction (Reject). The
// compensation then gives the Redis unit back through the standard path. It
// returns the reservation's status afterwards: a reservation that already
// moved on (an order made by another delivery, a rejection) is left as it is.
func (s *Store) RejectUnprocessable(ctx context.Context, in steps.UnprocessableInput) (state.Reservation, error) {
	if err := in.Message.Validate(); err != nil {
		return state.Reservation{}, fmt.Errorf("reject %s as unprocessable: %w: %w", in.Message.ReservationID, ErrNoDecision, err)
	}
	reason := unprocessableReason(in.Detail)
	var status state.Reservation
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := Record(ctx, tx, in.Message); err != nil {
			return err
		}
		var sub Subject
		if err := tx.QueryRow(ctx, `SELECT status, activity_id, sku_id FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE`,
			in.Message.ReservationID).Scan(&status, &sub.ActivityID, &sub.SKUID); err != nil {
			return fmt.Errorf("lock reservation %s: %w", in.Message.ReservationID, err)
		}
		if status != state.ReservationReserved {
			return nil
		}
		sub.ReservationID = in.Message.ReservationID
		if err := Reject(ctx, tx, sub, reason); err != nil {
			return err
		}
		status = state.ReservationOrderRejected
		return nil
	})
	if err != nil {
		return state.Reservation{}, err
	}
	if status == state.ReservationOrderRejected {
		s.log.ErrorContext(ctx, "order.rejected_unprocessable", "reservation_id", in.Message.ReservationID, "reason", reason)
	}
	return status, nil
}

// unprocessableReason is the reason code of an unprocessable reservation:
// ORDER_UNPROCESSABLE, with ":" and the first 40 bytes of detail if any.
func unprocessableReason(detail string) string {
	if detail == "" {
		return steps.ReasonUnprocessable
	}
	return steps.ReasonUnprocessable + ":" + detail[:min(len(detail), 40)]
}
