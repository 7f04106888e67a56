// Package payments holds the money side of an order in PostgreSQL
// (docs/spec.md#payments): recording a provider payment, the CANCEL_PENDING → CANCELLED path
// that never cancels a paid order, and refunds of payments that landed after
// a cancel. Every transition is a conditional update whose affected rows are
// checked, and each writes its ledger row and outbox event in the same
// transaction. External calls never happen inside a transaction.
package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// Errors of the store.
var (
	ErrUnknownOrder   = orders.ErrUnknown
	ErrAmountMismatch = errors.New("payment amount or currency differs from the order's")
	ErrConflict       = errors.New("payment transaction already recorded for another order")
)

// PaymentID is the fixed payment_id of a provider transaction.
func PaymentID(provider, transactionID string) uuid.UUID {
	return ids.Named("PAYMENT", uuid.Nil, provider, transactionID)
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

// Record records a provider payment idempotently and moves the order to PAID
// by conditional update from CREATED, PAYING or CANCEL_PENDING, with the
// ledger (occupied → sold) and an ORDER_PAID outbox event, in one
// transaction. A payment for a CANCELLED order is recorded with
// its refund obligation (refund_task) for the refund relay. An unknown order
// is an error: it never creates an order.
func (s *Store) Record(ctx context.Context, ev steps.Evidence) (steps.RecordResult, error) {
	var res steps.RecordResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.RecordTx(ctx, tx, ev)
		return err
	})
	return res, err
}

// RecordTx is Record inside the caller's transaction (the callback handler
// records the callback and the payment together).
func (s *Store) RecordTx(ctx context.Context, tx pgx.Tx, ev steps.Evidence) (steps.RecordResult, error) {
	var res steps.RecordResult
	o, err := orders.Lock(ctx, tx, ev.OrderID)
	if err != nil {
		return res, err
	}
	if ev.AmountCents != o.AmountCents || ev.Currency != "" && ev.Currency != o.Currency {
		return res, fmt.Errorf("%w: order %s costs %d %s, payment %s is %d %s", ErrAmountMismatch,
			ev.OrderID, o.AmountCents, o.Currency, ev.TransactionID, ev.AmountCents, ev.Currency)
	}
	res = steps.RecordResult{PaymentID: PaymentID(ev.Provider, ev.TransactionID), ReservationID: o.ReservationID,
		ActivityID: o.ActivityID, SKUID: o.SKUID}
	tag, err := tx.Exec(ctx, `
		INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, currency, status, paid_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'SUCCESS', $7)
		ON CONFLICT DO NOTHING`, res.PaymentID, ev.OrderID, ev.Provider, ev.TransactionID, ev.AmountCents, o.Currency, ev.PaidAt)
	if err != nil {
		return res, fmt.Errorf("insert payment record: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var owner uuid.UUID
		if err := tx.QueryRow(ctx, `SELECT order_id FROM payment_record WHERE provider = $1 AND provider_transaction_id = $2`,
			ev.Provider, ev.TransactionID).Scan(&owner); err != nil {
			return res, fmt.Errorf("read payment record: %w", err)
		}
		if owner != ev.OrderID {
			return res, fmt.Errorf("%w: %s belongs to %s", ErrConflict, ev.TransactionID, owner)
		}
	}
	if err := s.fp.Check(failpoint.AfterPaymentRecordInsert); err != nil {
		return res, err
	}
	switch o.Status {
	case state.OrderCreated, state.OrderPaying, state.OrderCancelPending:
		if err := payOrder(ctx, tx, ev, o, res.PaymentID); err != nil {
			return res, err
		}
		res.Outcome, res.OrderStatus = steps.RecordPaid, state.OrderPaid
	case state.OrderPaid:
		res.Outcome, res.OrderStatus = steps.RecordAlreadyPaid, state.OrderPaid
		if o.PaymentID != nil && *o.PaymentID != res.PaymentID {
			res.Outcome = steps.RecordDuplicatePayment
			if err := outbox.Insert(ctx, tx, "PAYMENT", res.PaymentID, "DUPLICATE_PAYMENT", ev.OrderID.String(), map[string]any{
				"payment_id": res.PaymentID, "order_id": ev.OrderID, "transaction_id": ev.TransactionID, "amount_cents": ev.AmountCents,
			}); err != nil {
				return res, err
			}
		}
	case state.OrderCancelled:
		res.Outcome, res.OrderStatus = steps.RecordPaidAfterCancel, state.OrderCancelled
		if err := outbox.Insert(ctx, tx, "PAYMENT", res.PaymentID, "PAYMENT_AFTER_CANCEL", ev.OrderID.String(), map[string]any{
			"payment_id": res.PaymentID, "order_id": ev.OrderID, "transaction_id": ev.TransactionID, "amount_cents": ev.AmountCents,
		}); err != nil {
			return res, err
		}
	default: // REFUNDING, REFUNDED
		res.Outcome, res.OrderStatus = steps.RecordAlreadyRefunding, o.Status
	}
	// Whether this payment is owed back is seckill_refund_owed's to say, on
	// the order as this transaction left it (PaidAfterCancel,
	// AlreadyRefunding and DuplicatePayment are the outcomes it holds for).
	if err := oweRefund(ctx, tx, res.PaymentID); err != nil {
		return res, err
	}
	return res, nil
}

func payOrder(ctx context.Context, tx pgx.Tx, ev steps.Evidence, o orders.Row, paymentID uuid.UUID) error {
	if err := orders.Pay(ctx, tx, ev.OrderID, paymentID, ev.PaidAt); err != nil {
		return err
	}
	if err := inventory.Sell(ctx, tx, inventory.SKU{ActivityID: o.ActivityID, SKUID: o.SKUID}, o.ReservationID, ev.OrderID); err != nil {
		return err
	}
	if err := pg.Exec(ctx, tx, "payment intent of "+ev.OrderID.String()+" → PAID", `UPDATE payment_intent SET status = 'PAID', updated_at = clock_timestamp()
		WHERE order_id = $1 AND provider_transaction_id = $2`, ev.OrderID, ev.TransactionID); err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, "ORDER", ev.OrderID, "ORDER_PAID", ev.OrderID.String(), map[string]any{
		"order_id": ev.OrderID, "payment_id": paymentID, "transaction_id": ev.TransactionID, "amount_cents": ev.AmountCents,
		"currency": o.Currency, "paid_at": ev.PaidAt, "activity_id": o.ActivityID, "sku_id": o.SKUID, "user_id": o.UserID,
	})
}
