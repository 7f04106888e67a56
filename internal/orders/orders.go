// Package orders owns the orders table: every change of an order's status
// (state.Order) is one function here, a conditional update whose affected
// rows are checked. The order transaction of a reservation (Store.Create)
// lives here too; the payment transactions (internal/payments) call the
// tx-level functions inside their own transactions.
package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state"
)

// ErrUnknown means there is no such order.
var ErrUnknown = errors.New("no such order")

// ID is the fixed order id of a reservation.
func ID(reservationID uuid.UUID) uuid.UUID { return ids.Named("ORDER", reservationID) }

// Row is an order locked for a change.
type Row struct {
	PaymentID     *uuid.UUID // the payment that paid it
	Status        state.Order
	AmountCents   int64
	Currency      string // the sale's (sale_activity.currency)
	ReservationID uuid.UUID
	ActivityID    int64
	SKUID         int64
	UserID        int64
}

// Lock takes the order's row lock (ErrUnknown when there is none).
func Lock(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) (Row, error) {
	var o Row
	err := tx.QueryRow(ctx, `
		SELECT o.status, o.amount_cents, a.currency, o.reservation_id, o.activity_id, o.sku_id, o.user_id, o.payment_id
		FROM orders o JOIN sale_activity a ON a.activity_id = o.activity_id
		WHERE o.order_id = $1 FOR UPDATE OF o`,
		orderID).Scan(&o.Status, &o.AmountCents, &o.Currency, &o.ReservationID, &o.ActivityID, &o.SKUID, &o.UserID, &o.PaymentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, ErrUnknown
	}
	if err != nil {
		return o, fmt.Errorf("lock order %s: %w", orderID, err)
	}
	return o, nil
}

// Status reads an order's status (ErrUnknown when there is none).
func Status(ctx context.Context, db pg.Querier, orderID uuid.UUID) (state.Order, error) {
	var status state.Order
	err := db.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, orderID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Order{}, ErrUnknown
	}
	if err != nil {
		return state.Order{}, fmt.Errorf("read order %s: %w", orderID, err)
	}
	return status, nil
}

// ToPaying moves a locked CREATED or PAYING order to PAYING.
func ToPaying(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) error {
	return pg.MoveOne(ctx, tx, fmt.Sprintf("order %s → PAYING", orderID), `
		UPDATE orders SET status = 'PAYING', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING')`, orderID)
}

// Pay moves CREATED, PAYING or CANCEL_PENDING → PAID with the payment that paid it.
func Pay(ctx context.Context, tx pgx.Tx, orderID, paymentID uuid.UUID, paidAt time.Time) error {
	return pg.MoveOne(ctx, tx, fmt.Sprintf("order %s → PAID", orderID), `
		UPDATE orders SET status = 'PAID', paid_at = $2, payment_id = $3, version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')`, orderID, paidAt, paymentID)
}

// BeginCancel moves CREATED/PAYING → CANCEL_PENDING unless a payment is
// being started at the provider (a payment_intent CREATING younger than
// startGuard) and, with requireExpired, only once expires_at has passed.
// moved is false when the order was not in a state to move.
func BeginCancel(ctx context.Context, db pg.Execer, orderID uuid.UUID, requireExpired bool, startGuard string) (moved bool, err error) {
	n, err := pg.Moved(ctx, db, fmt.Sprintf("order %s → CANCEL_PENDING", orderID), `
		UPDATE orders SET status = 'CANCEL_PENDING', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING') AND (NOT $2 OR expires_at <= clock_timestamp())
		  AND NOT EXISTS (SELECT 1 FROM payment_intent i WHERE i.order_id = orders.order_id AND i.status = 'CREATING'
		                  AND i.updated_at > clock_timestamp() - $3::interval)`, orderID, requireExpired, startGuard)
	return n == 1, err
}

// Cancel moves CANCEL_PENDING → CANCELLED if the order has no successful
// payment; ok is false (and the row zero) when it did not move.
func Cancel(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) (o Row, ok bool, err error) {
	err = tx.QueryRow(ctx, `
		UPDATE orders SET status = 'CANCELLED', cancelled_at = clock_timestamp(), version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status = 'CANCEL_PENDING'
		  AND NOT EXISTS (SELECT 1 FROM payment_record p WHERE p.order_id = orders.order_id AND p.status = 'SUCCESS')
		RETURNING status, reservation_id, activity_id, sku_id, user_id`, orderID).Scan(&o.Status, &o.ReservationID, &o.ActivityID, &o.SKUID, &o.UserID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("order %s → CANCELLED: %w", orderID, err)
	}
	return o, true, nil
}

// ToRefunding moves a CANCELLED order whose payment is being refunded to
// REFUNDING (an order in another state is left as it is: a second payment of
// a PAID order is refunded without touching the order).
func ToRefunding(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) error {
	return pg.Exec(ctx, tx, fmt.Sprintf("order %s → REFUNDING", orderID), `
		UPDATE orders SET status = 'REFUNDING', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status = 'CANCELLED'`, orderID)
}

// ToRefunded moves REFUNDING → REFUNDED (a no-op in any other state).
func ToRefunded(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) error {
	return pg.Exec(ctx, tx, fmt.Sprintf("order %s → REFUNDED", orderID), `
		UPDATE orders SET status = 'REFUNDED', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status = 'REFUNDING'`, orderID)
}
