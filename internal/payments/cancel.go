package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state"
)

// paymentStartGuard is how long a payment being started at the provider
// (payment_intent CREATING) holds a cancel back; a start older than this
// crashed, and the cancel's provider query decides.
const paymentStartGuard = "30 seconds"

// BeginCancel moves CREATED/PAYING → CANCEL_PENDING (docs/spec.md#payment-vs-cancel). With
// requireExpired the move happens only once expires_at has passed (the
// expiry path); a user's own cancel does not need it. While the buyer is
// starting a payment at the provider it answers state.CancelPaymentStarting and
// changes nothing, so that no provider transaction is created for an order
// that is being cancelled. Otherwise it returns the order's status
// afterwards: CANCEL_PENDING, or PAID/CANCELLED/... when it moved on.
func (s *Store) BeginCancel(ctx context.Context, orderID uuid.UUID, requireExpired bool) (state.Cancel, error) {
	moved, err := orders.BeginCancel(ctx, s.pool, orderID, requireExpired, paymentStartGuard)
	if err != nil {
		return state.Cancel{}, err
	}
	if moved {
		if err := s.fp.Check(failpoint.AfterCancelPending); err != nil {
			return state.Cancel{}, err
		}
		return state.CancelFound(state.OrderCancelPending), nil
	}
	var status state.Order
	var starting bool
	err = s.pool.QueryRow(ctx, `
		SELECT o.status, EXISTS (SELECT 1 FROM payment_intent i WHERE i.order_id = o.order_id AND i.status = 'CREATING'
		                         AND i.updated_at > clock_timestamp() - $2::interval)
		FROM orders o WHERE o.order_id = $1`, orderID, paymentStartGuard).Scan(&status, &starting)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Cancel{}, ErrUnknownOrder
	}
	if err != nil {
		return state.Cancel{}, fmt.Errorf("read order %s: %w", orderID, err)
	}
	return cancelAnswer(status, starting), nil
}

// cancelAnswer is BeginCancel's answer for an order it did not move, in
// status, with a payment being started at the provider or not (starting):
// state.CancelPaymentStarting for a CREATED or PAYING order whose payment
// is starting (the cancel waits), the order's status otherwise.
func cancelAnswer(status state.Order, starting bool) state.Cancel {
	if starting && (status == state.OrderCreated || status == state.OrderPaying) {
		return state.CancelPaymentStarting
	}
	return state.CancelFound(status)
}

// Status reads an order's status.
func (s *Store) Status(ctx context.Context, orderID uuid.UUID) (state.Order, error) {
	return orders.Status(ctx, s.pool, orderID)
}

// FinalCancel cancels a CANCEL_PENDING order that has no successful payment,
// releasing its PostgreSQL unit (occupied → available) with a ledger row, the
// reservation CANCELLED, its provider transactions marked CLOSED (the cancel
// closed them or found none) and an ORDER_CANCELLED outbox event, in one
// transaction. It returns the order's status afterwards (PAID if a payment
// won the race).
func (s *Store) FinalCancel(ctx context.Context, orderID uuid.UUID) (state.Order, error) {
	var status state.Order
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		o, ok, err := orders.Cancel(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if !ok {
			st, err := orders.Status(ctx, tx, orderID)
			status = st
			return err
		}
		status = state.OrderCancelled
		if err := inventory.Release(ctx, tx, inventory.SKU{ActivityID: o.ActivityID, SKUID: o.SKUID}, o.ReservationID, orderID); err != nil {
			return err
		}
		if err := inventory.Cancel(ctx, tx, o.ReservationID); err != nil {
			return err
		}
		if err := pg.Exec(ctx, tx, "payment intent of "+orderID.String()+" → CLOSED", `UPDATE payment_intent SET status = 'CLOSED', updated_at = clock_timestamp()
			WHERE order_id = $1 AND status IN ('CREATING', 'OPEN')`, orderID); err != nil {
			return err
		}
		return outbox.Insert(ctx, tx, "ORDER", orderID, "ORDER_CANCELLED", orderID.String(), map[string]any{
			"order_id": orderID, "reservation_id": o.ReservationID, "activity_id": o.ActivityID, "sku_id": o.SKUID, "user_id": o.UserID,
		})
	})
	return status, err
}
