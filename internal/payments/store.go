// Package payments holds the money side of an order in PostgreSQL (seed §7.6,
// §9.9): recording a provider payment, the CANCEL_PENDING → CANCELLED path
// that never cancels a paid order, and refunds of payments that landed after
// a cancel. Every transition is a conditional update whose affected rows are
// checked, and each writes its ledger row and outbox event in the same
// transaction. External calls never happen inside a transaction.
package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/outbox"
)

// Order statuses (orders.status).
const (
	StatusCreated       = "CREATED"
	StatusPaying        = "PAYING"
	StatusCancelPending = "CANCEL_PENDING"
	StatusPaid          = "PAID"
	StatusCancelled     = "CANCELLED"
	StatusRefunding     = "REFUNDING"
	StatusRefunded      = "REFUNDED"
)

// Errors of the store.
var (
	ErrUnknownOrder   = errors.New("no such order")
	ErrAmountMismatch = errors.New("payment amount differs from the order amount")
	ErrConflict       = errors.New("payment transaction already recorded for another order")
)

// Evidence is a provider's proof that an order was paid.
type Evidence struct {
	OrderID       uuid.UUID
	Provider      string
	TransactionID string
	AmountCents   int64
	PaidAt        time.Time
}

// PaymentID is the fixed payment_id of a provider transaction.
func PaymentID(provider, transactionID string) uuid.UUID {
	return ids.Named("PAYMENT", uuid.Nil, provider, transactionID)
}

// Outcome of Record.
type Outcome string

// Outcomes of recording a payment.
const (
	// Paid: this evidence moved the order to PAID now.
	Paid Outcome = "PAID"
	// AlreadyPaid: the order was PAID before (a duplicate callback).
	AlreadyPaid Outcome = "ALREADY_PAID"
	// PaidAfterCancel: the order was CANCELLED; the payment is recorded and
	// must be refunded (never lost, never turned into an order).
	PaidAfterCancel Outcome = "PAID_AFTER_CANCEL"
	// AlreadyRefunding: the late payment is already being refunded.
	AlreadyRefunding Outcome = "ALREADY_REFUNDING"
)

// RecordResult says what Record did.
type RecordResult struct {
	Outcome       Outcome
	PaymentID     uuid.UUID
	OrderStatus   string
	ReservationID uuid.UUID
	ActivityID    int64
	SKUID         int64
}

// Store runs the payment transactions.
type Store struct {
	pool *pgxpool.Pool
	fp   *failpoint.Set
}

// NewStore returns a Store; fp may be nil.
func NewStore(pool *pgxpool.Pool, fp *failpoint.Set) *Store {
	if fp == nil {
		fp = &failpoint.Set{}
	}
	return &Store{pool: pool, fp: fp}
}

type orderRow struct {
	status        string
	amount        int64
	reservationID uuid.UUID
	activityID    int64
	skuID         int64
	userID        int64
}

func lockOrder(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) (orderRow, error) {
	var o orderRow
	err := tx.QueryRow(ctx, `SELECT status, amount_cents, reservation_id, activity_id, sku_id, user_id FROM orders WHERE order_id = $1 FOR UPDATE`,
		orderID).Scan(&o.status, &o.amount, &o.reservationID, &o.activityID, &o.skuID, &o.userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return o, ErrUnknownOrder
	}
	if err != nil {
		return o, fmt.Errorf("lock order %s: %w", orderID, err)
	}
	return o, nil
}

// Record records a provider payment idempotently and moves the order to PAID
// by conditional update from CREATED, PAYING or CANCEL_PENDING, with the
// ledger (occupied → sold) and an ORDER_PAID outbox event, in one
// transaction (seed §9.9). A payment for a CANCELLED order is recorded for
// refund. An unknown order is an error: it never creates an order.
func (s *Store) Record(ctx context.Context, ev Evidence) (RecordResult, error) {
	var res RecordResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		o, err := lockOrder(ctx, tx, ev.OrderID)
		if err != nil {
			return err
		}
		if ev.AmountCents != o.amount {
			return fmt.Errorf("%w: order %s costs %d, payment %s is %d", ErrAmountMismatch, ev.OrderID, o.amount, ev.TransactionID, ev.AmountCents)
		}
		res = RecordResult{PaymentID: PaymentID(ev.Provider, ev.TransactionID), ReservationID: o.reservationID,
			ActivityID: o.activityID, SKUID: o.skuID}
		tag, err := tx.Exec(ctx, `
			INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, status, paid_at)
			VALUES ($1, $2, $3, $4, $5, 'SUCCESS', $6)
			ON CONFLICT DO NOTHING`, res.PaymentID, ev.OrderID, ev.Provider, ev.TransactionID, ev.AmountCents, ev.PaidAt)
		if err != nil {
			return fmt.Errorf("insert payment record: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var owner uuid.UUID
			if err := tx.QueryRow(ctx, `SELECT order_id FROM payment_record WHERE provider = $1 AND provider_transaction_id = $2`,
				ev.Provider, ev.TransactionID).Scan(&owner); err != nil {
				return fmt.Errorf("read payment record: %w", err)
			}
			if owner != ev.OrderID {
				return fmt.Errorf("%w: %s belongs to %s", ErrConflict, ev.TransactionID, owner)
			}
		}
		if err := s.fp.Check(failpoint.AfterPaymentRecordInsert); err != nil {
			return err
		}
		switch o.status {
		case StatusCreated, StatusPaying, StatusCancelPending:
			if err := payOrder(ctx, tx, ev, o, res.PaymentID); err != nil {
				return err
			}
			res.Outcome, res.OrderStatus = Paid, StatusPaid
		case StatusPaid:
			res.Outcome, res.OrderStatus = AlreadyPaid, StatusPaid
		case StatusCancelled:
			res.Outcome, res.OrderStatus = PaidAfterCancel, StatusCancelled
			if err := outbox.Insert(ctx, tx, "PAYMENT", res.PaymentID, "PAYMENT_AFTER_CANCEL", ev.OrderID.String(), map[string]any{
				"payment_id": res.PaymentID, "order_id": ev.OrderID, "transaction_id": ev.TransactionID, "amount_cents": ev.AmountCents,
			}); err != nil {
				return err
			}
		default: // REFUNDING, REFUNDED
			res.Outcome, res.OrderStatus = AlreadyRefunding, o.status
		}
		return nil
	})
	return res, err
}

func payOrder(ctx context.Context, tx pgx.Tx, ev Evidence, o orderRow, paymentID uuid.UUID) error {
	tag, err := tx.Exec(ctx, `
		UPDATE orders SET status = 'PAID', paid_at = $2, version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')`, ev.OrderID, ev.PaidAt)
	if err != nil || tag.RowsAffected() != 1 {
		return fmt.Errorf("order %s → PAID moved %d rows: %v", ev.OrderID, tag.RowsAffected(), err)
	}
	tag, err = tx.Exec(ctx, `
		UPDATE sku_inventory SET occupied_stock = occupied_stock - 1, sold_stock = sold_stock + 1,
		       version = version + 1, updated_at = clock_timestamp()
		WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0`, o.activityID, o.skuID)
	if err != nil || tag.RowsAffected() != 1 {
		return fmt.Errorf("stock occupied → sold for %s moved %d rows: %v", ev.OrderID, tag.RowsAffected(), err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_occupied, delta_sold)
		VALUES ($1, $2, $3, $4, $5, 'SELL', -1, 1)`,
		"SELL:"+ev.OrderID.String(), o.activityID, o.skuID, o.reservationID, ev.OrderID); err != nil {
		return fmt.Errorf("ledger sell: %w", err)
	}
	return outbox.Insert(ctx, tx, "ORDER", ev.OrderID, "ORDER_PAID", ev.OrderID.String(), map[string]any{
		"order_id": ev.OrderID, "payment_id": paymentID, "transaction_id": ev.TransactionID, "amount_cents": ev.AmountCents,
		"paid_at": ev.PaidAt, "activity_id": o.activityID, "sku_id": o.skuID, "user_id": o.userID,
	})
}

// BeginCancel moves CREATED/PAYING → CANCEL_PENDING (seed §9.9). With
// requireExpired the move happens only once expires_at has passed (the
// expiry path); a user's own cancel does not need it. It returns the order's
// status afterwards: CANCEL_PENDING, or PAID/CANCELLED/... when it moved on.
func (s *Store) BeginCancel(ctx context.Context, orderID uuid.UUID, requireExpired bool) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `
		UPDATE orders SET status = 'CANCEL_PENDING', version = version + 1, updated_at = clock_timestamp()
		WHERE order_id = $1 AND status IN ('CREATED', 'PAYING') AND (NOT $2 OR expires_at <= clock_timestamp())
		RETURNING status`, orderID, requireExpired).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Status(ctx, orderID)
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
// reservation CANCELLED and an ORDER_CANCELLED outbox event, in one
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
		return outbox.Insert(ctx, tx, "ORDER", orderID, "ORDER_CANCELLED", orderID.String(), map[string]any{
			"order_id": orderID, "reservation_id": o.reservationID, "activity_id": o.activityID, "sku_id": o.skuID, "user_id": o.userID,
		})
	})
	return status, err
}

// Refund is a payment to give back.
type Refund struct {
	PaymentID     uuid.UUID
	OrderID       uuid.UUID
	Provider      string
	TransactionID string
	AmountCents   int64
}

// RefundID is the fixed refund id of a payment (the provider dedupes on it).
func RefundID(paymentID uuid.UUID) string { return "refund_" + ids.Named("REFUND", paymentID).String() }

// BeginRefund moves a successful payment of a CANCELLED order to REFUNDING
// (payment and order) and returns what to refund. A payment already
// refunding or refunded is returned as is; a PAID order is never refunded here.
func (s *Store) BeginRefund(ctx context.Context, paymentID uuid.UUID) (Refund, string, error) {
	var r Refund
	var status string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var orderStatus string
		err := tx.QueryRow(ctx, `
			SELECT p.order_id, p.provider, p.provider_transaction_id, p.amount_cents, p.status, o.status
			FROM payment_record p JOIN orders o ON o.order_id = p.order_id
			WHERE p.payment_id = $1 FOR UPDATE`, paymentID).Scan(&r.OrderID, &r.Provider, &r.TransactionID, &r.AmountCents, &status, &orderStatus)
		if err != nil {
			return fmt.Errorf("read payment %s: %w", paymentID, err)
		}
		r.PaymentID = paymentID
		if status != "SUCCESS" {
			return nil
		}
		if orderStatus != StatusCancelled && orderStatus != StatusRefunding {
			return fmt.Errorf("payment %s belongs to a %s order: not refundable", paymentID, orderStatus)
		}
		if _, err := tx.Exec(ctx, `UPDATE payment_record SET status = 'REFUNDING', updated_at = clock_timestamp() WHERE payment_id = $1 AND status = 'SUCCESS'`, paymentID); err != nil {
			return fmt.Errorf("payment → REFUNDING: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'REFUNDING', version = version + 1, updated_at = clock_timestamp()
			WHERE order_id = $1 AND status = 'CANCELLED'`, r.OrderID); err != nil {
			return fmt.Errorf("order → REFUNDING: %w", err)
		}
		status = StatusRefunding
		return nil
	})
	return r, status, err
}

// FinishRefund records the provider's refund: payment and order REFUNDED,
// with a PAYMENT_REFUNDED outbox event.
func (s *Store) FinishRefund(ctx context.Context, r Refund) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payment_record SET status = 'REFUNDED', refunded_at = clock_timestamp(), updated_at = clock_timestamp()
			WHERE payment_id = $1 AND status = 'REFUNDING'`, r.PaymentID)
		if err != nil {
			return fmt.Errorf("payment → REFUNDED: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil // already REFUNDED
		}
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'REFUNDED', version = version + 1, updated_at = clock_timestamp()
			WHERE order_id = $1 AND status = 'REFUNDING'`, r.OrderID); err != nil {
			return fmt.Errorf("order → REFUNDED: %w", err)
		}
		return outbox.Insert(ctx, tx, "PAYMENT", r.PaymentID, "PAYMENT_REFUNDED", r.OrderID.String(), map[string]any{
			"payment_id": r.PaymentID, "order_id": r.OrderID, "transaction_id": r.TransactionID, "amount_cents": r.AmountCents,
		})
	})
}
