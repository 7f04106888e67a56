package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// ErrNotRefundable means the payment is not one to give back (it is what
// paid its order, or PostgreSQL holds no such payment): no retry changes it.
var ErrNotRefundable = errors.New("not refundable")

// RefundID is the fixed refund id of a payment (the provider dedupes on it).
func RefundID(paymentID uuid.UUID) string { return "refund_" + ids.Named("REFUND", paymentID).String() }

// oweRefund records, in the transaction that recorded a payment, the
// obligation to refund it when it is not to be kept (seckill_refund_owed: its
// order is cancelled or refunding, or was paid by another payment): a
// refund_task the refund relay works off until FinishRefund. Only a SUCCESS
// payment gets one here: a refunding or refunded one already has its task
// (reconciliation writes a missing one).
func oweRefund(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID) error {
	if _, err := tx.Exec(ctx, `
		INSERT INTO refund_task (payment_id, order_id, activity_id, sku_id)
		SELECT p.payment_id, p.order_id, o.activity_id, o.sku_id
		FROM payment_record p JOIN orders o ON o.order_id = p.order_id
		WHERE p.payment_id = $1 AND p.status = 'SUCCESS' AND seckill_refund_owed(p.payment_id, p.status, o.status, o.payment_id)
		ON CONFLICT (payment_id) DO NOTHING`, paymentID); err != nil {
		return fmt.Errorf("record refund obligation of %s: %w", paymentID, err)
	}
	return nil
}

// BeginRefund moves a successful payment of a CANCELLED order to REFUNDING
// (payment and order) and returns what to refund. A payment already
// refunding or refunded is returned as is; a PAID order is never refunded here.
func (s *Store) BeginRefund(ctx context.Context, paymentID uuid.UUID) (steps.Refund, state.Payment, error) {
	var r steps.Refund
	var status state.Payment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var orderStatus state.Order
		var paymentStatus state.Payment
		var owed bool
		err := tx.QueryRow(ctx, `
			SELECT p.order_id, p.provider, p.provider_transaction_id, p.amount_cents, p.status, o.status,
			       seckill_refund_owed(p.payment_id, p.status, o.status, o.payment_id)
			FROM payment_record p JOIN orders o ON o.order_id = p.order_id
			WHERE p.payment_id = $1 FOR UPDATE`, paymentID).Scan(&r.OrderID, &r.Provider, &r.TransactionID, &r.AmountCents, &paymentStatus, &orderStatus, &owed)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("payment %s: not in PostgreSQL: %w", paymentID, ErrNotRefundable)
		}
		if err != nil {
			return fmt.Errorf("read payment %s: %w", paymentID, err)
		}
		r.PaymentID = paymentID
		status = paymentStatus
		if paymentStatus != state.PaymentSuccess {
			return nil
		}
		switch {
		case owed:
			// Its order is cancelled or refunding, or a second payment of a
			// paid order (given back, the order stays PAID): seckill_refund_owed.
		case orderStatus == state.OrderPaid:
			// The payment that paid its order is never refunded here.
			return fmt.Errorf("payment %s pays its %s order: %w", paymentID, orderStatus, ErrNotRefundable)
		default:
			// The order's cancel may still be under way: retried.
			return fmt.Errorf("payment %s pays a %s order: not refundable yet", paymentID, orderStatus)
		}
		if _, err := tx.Exec(ctx, `UPDATE payment_record SET status = 'REFUNDING', updated_at = clock_timestamp() WHERE payment_id = $1 AND status = 'SUCCESS'`, paymentID); err != nil {
			return fmt.Errorf("payment → REFUNDING: %w", err)
		}
		if err := orders.ToRefunding(ctx, tx, r.OrderID); err != nil {
			return err
		}
		status = state.PaymentRefunding
		return nil
	})
	return r, status, err
}

// FinishRefund records the provider's refund: payment and order REFUNDED,
// the refund obligation done, with a PAYMENT_REFUNDED outbox event.
func (s *Store) FinishRefund(ctx context.Context, r steps.Refund) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE refund_task SET status = 'DONE', last_error = NULL, updated_at = clock_timestamp()
			WHERE payment_id = $1 AND status <> 'DONE'`, r.PaymentID); err != nil {
			return fmt.Errorf("refund task of %s → DONE: %w", r.PaymentID, err)
		}
		tag, err := tx.Exec(ctx, `UPDATE payment_record SET status = 'REFUNDED', refunded_at = clock_timestamp(), updated_at = clock_timestamp()
			WHERE payment_id = $1 AND status = 'REFUNDING'`, r.PaymentID)
		if err != nil {
			return fmt.Errorf("payment → REFUNDED: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // already REFUNDED
		}
		if err := orders.ToRefunded(ctx, tx, r.OrderID); err != nil {
			return err
		}
		return outbox.Insert(ctx, tx, "PAYMENT", r.PaymentID, "PAYMENT_REFUNDED", r.OrderID.String(), map[string]any{
			"payment_id": r.PaymentID, "order_id": r.OrderID, "transaction_id": r.TransactionID, "amount_cents": r.AmountCents,
		})
	})
}

// HoldRefund takes a refund that can never pass out of the refund relay's
// hands: refund_task MANUAL with the reason, for a person (the overdue-refund
// alert keeps counting it). A task already DONE is left as it is.
func (s *Store) HoldRefund(ctx context.Context, paymentID uuid.UUID, reason string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE refund_task SET status = 'MANUAL', last_error = left($2, 500), updated_at = clock_timestamp()
		WHERE payment_id = $1 AND status IN ('PENDING', 'STARTED')`, paymentID, reason); err != nil {
		return fmt.Errorf("refund task of %s → MANUAL: %w", paymentID, err)
	}
	return nil
}
