package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/outbox"
)

// paymentStartGuard is how long a payment being started at the provider
// (payment_intent CREATING) holds a cancel back; a start older than this
// crashed, and the cancel's provider query decides.
const paymentStartGuard = "30 seconds"

// BeginCancel moves CREATED/PAYING → CANCEL_PENDING (seed §9.9). With
// requireExpired the move happens only once expires_at has passed (the
// expiry path); a user's own cancel does not need it. While the buyer is
// starting a payment at the provider it answers StatusPaymentStarting and
// changes nothing, so that no provider transaction is created for an order
// that is being cancelled. Otherwise it returns the order's status
// afterwards: CANCEL_PENDING, or PAID/CANCELLED/... when it moved on.
func (s *Store) BeginCancel(ctx context.Context, orderID uuid.UUID, requireExpired bool) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `
		UPDATE orders SET status = 'CANCEL_PENDING', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING') AND (NOT $2 OR expires_at <= clock_timestamp())
		  AND NOT EXISTS (SELECT 1 FROM payment_intent i WHERE i.order_id = orders.order_id AND i.status = 'CREATING'
		                  AND i.updated_at > clock_timestamp() - $3::interval)
		RETURNING status`, orderID, requireExpired, paymentStartGuard).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		var starting bool
		err := s.pool.QueryRow(ctx, `
			SELECT o.status, EXISTS (SELECT 1 FROM payment_intent i WHERE i.order_id = o.order_id AND i.status = 'CREATING'
			                         AND i.updated_at > clock_timestamp() - $2::interval)
			FROM orders o WHERE o.order_id = $1`, orderID, paymentStartGuard).Scan(&status, &starting)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", ErrUnknownOrder
		}
		if err != nil {
			return "", fmt.Errorf("read order %s: %w", orderID, err)
		}
		if starting && (status == StatusCreated || status == StatusPaying) {
			return StatusPaymentStarting, nil
		}
		return status, nil
	}
	if err != nil {
		return "", fmt.Errorf("order %s → CANCEL_PENDING: %w", orderID, err)
	}
	if err := s.fp.Check(failpoint.AfterCancelPending); err != nil {
		return "", err
	}
	return status, nil
}

// Status reads an order's status.
func (s *Store) Status(ctx context.Context, orderID uuid.UUID) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, orderID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrUnknownOrder
	}
	if err != nil {
		return "", fmt.Errorf("read order %s: %w", orderID, err)
	}
	return status, nil
}

// FinalCancel cancels a CANCEL_PENDING order that has no successful payment,
// releasing its PostgreSQL unit (occupied → available) with a ledger row, the
// reservation CANCELLED, its provider transactions marked CLOSED (the cancel
// closed them or found none) and an ORDER_CANCELLED outbox event, in one
// transaction. It returns the order's status afterwards (PAID if a payment
// won the race).
func (s *Store) FinalCancel(ctx context.Context, orderID uuid.UUID) (string, error) {
	status := ""
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var o orderRow
		err := tx.QueryRow(ctx, `
			UPDATE orders SET status = 'CANCELLED', cancelled_at = clock_timestamp(), version = version + 1, updated_at = clock_timestamp()
			WHERE order_id = $1 AND status = 'CANCEL_PENDING'
			  AND NOT EXISTS (SELECT 1 FROM payment_record p WHERE p.order_id = orders.order_id AND p.status = 'SUCCESS')
			RETURNING reservation_id, activity_id, sku_id, user_id`, orderID).Scan(&o.reservationID, &o.activityID, &o.skuID, &o.userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, orderID).Scan(&status)
		}
		if err != nil {
			return fmt.Errorf("order %s → CANCELLED: %w", orderID, err)
		}
		status = StatusCancelled
		tag, err := tx.Exec(ctx, `
			UPDATE sku_inventory SET occupied_stock = occupied_stock - 1, available_stock = available_stock + 1,
			       version = version + 1, updated_at = clock_timestamp()
			WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0`, o.activityID, o.skuID)
		if err != nil || tag.RowsAffected() != 1 {
			return fmt.Errorf("release stock of %s moved %d rows: %v", orderID, tag.RowsAffected(), err)
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied)
			VALUES ($1, $2, $3, $4, $5, 'RELEASE', 1, -1)`,
			"RELEASE:"+orderID.String(), o.activityID, o.skuID, o.reservationID, orderID); err != nil {
			return fmt.Errorf("ledger release: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			UPDATE inventory_reservation SET status = 'CANCELLED', version = version + 1, updated_at = clock_timestamp()
			WHERE reservation_id = $1 AND status = 'ORDER_CREATED'`, o.reservationID); err != nil {
			return fmt.Errorf("reservation → CANCELLED: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE payment_intent SET status = 'CLOSED', updated_at = clock_timestamp()
			WHERE order_id = $1 AND status IN ('CREATING', 'OPEN')`, orderID); err != nil {
			return fmt.Errorf("payment intent → CLOSED: %w", err)
		}
		return outbox.Insert(ctx, tx, "ORDER", orderID, "ORDER_CANCELLED", orderID.String(), map[string]any{
			"order_id": orderID, "reservation_id": o.reservationID, "activity_id": o.activityID, "sku_id": o.skuID, "user_id": o.userID,
		})
	})
	return status, err
}
