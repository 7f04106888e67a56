package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/state"
)

// The provider transaction of an order is started in two steps around the
// provider call, never holding a row lock across it:
//
//	BeginPayment  CREATED/PAYING (not expired) → PAYING, payment_intent CREATING
//	provider      Create (idempotent by order id)
//	OpenPayment   payment_intent OPEN with the transaction id, if the order is
//	              still PAYING; otherwise the caller closes the transaction and
//	              never hands it to the buyer
//
// BeginCancel waits while an intent is CREATING (state.CancelPaymentStarting), so a
// cancel and a payment start never cross: no provider transaction is handed
// out for an order that is CANCEL_PENDING or later.

// BeginPayment moves the order to PAYING and marks its payment as being
// started. It returns the order's status when the order cannot be paid
// (ok=false): already paid, cancelling, cancelled, or expired ("EXPIRED").
func (s *Store) BeginPayment(ctx context.Context, orderID uuid.UUID) (status string, ok bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var expired bool
		var st state.Order
		err := tx.QueryRow(ctx, `SELECT status, expires_at <= clock_timestamp() FROM orders WHERE order_id = $1 FOR UPDATE`,
			orderID).Scan(&st, &expired)
		status = st.String()
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrUnknownOrder
		}
		if err != nil {
			return fmt.Errorf("lock order %s: %w", orderID, err)
		}
		if refusal, refused := paymentRefusal(st, expired); refused {
			status = refusal
			return nil
		}
		if err := orders.ToPaying(ctx, tx, orderID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO payment_intent (order_id, provider, amount_cents, currency, status)
			SELECT o.order_id, $2, o.amount_cents, a.currency, 'CREATING'
			FROM orders o JOIN sale_activity a ON a.activity_id = o.activity_id WHERE o.order_id = $1
			ON CONFLICT (order_id) DO UPDATE SET status = 'CREATING', updated_at = clock_timestamp()
			WHERE payment_intent.status <> 'PAID'`, orderID, ProviderName); err != nil {
			return fmt.Errorf("payment intent of %s → CREATING: %w", orderID, err)
		}
		status, ok = state.OrderPaying.String(), true
		return nil
	})
	return status, ok, err
}

// OpenPayment records the provider transaction started for the order if
// the order is still PAYING. ok=false (with the order's status) means the
// order moved on meanwhile: the caller must close the transaction at the
// provider and not hand it out.
func (s *Store) OpenPayment(ctx context.Context, orderID uuid.UUID, provider, transactionID string) (status string, ok bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var st state.Order
		if err := tx.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1 FOR UPDATE`, orderID).Scan(&st); err != nil {
			return fmt.Errorf("lock order %s: %w", orderID, err)
		}
		status = st.String()
		intent := startedIntent(st)
		if _, err := tx.Exec(ctx, `UPDATE payment_intent SET provider = $2, provider_transaction_id = $3, status = $4, updated_at = clock_timestamp()
			WHERE order_id = $1 AND status IN ('CREATING', 'OPEN')`, orderID, provider, transactionID, intent); err != nil {
			return fmt.Errorf("payment intent of %s → %s: %w", orderID, intent, err)
		}
		ok = st == state.OrderPaying
		return nil
	})
	return status, ok, err
}

// paymentRefusal decides whether an order locked in status, expired or
// not, can start a payment: only a CREATED or PAYING order not expired can.
// Otherwise refused is true and status is BeginPayment's answer: the order's
// status, or "EXPIRED" for a CREATED or PAYING order past expires_at.
func paymentRefusal(orderStatus state.Order, expired bool) (status string, refused bool) {
	if orderStatus != state.OrderCreated && orderStatus != state.OrderPaying {
		return orderStatus.String(), true
	}
	if expired {
		return "EXPIRED", true
	}
	return orderStatus.String(), false
}

// startedIntent is the payment_intent status OpenPayment records for an
// order found in orderStatus: OPEN if it is still PAYING, CLOSED otherwise
// (the caller closes the transaction at the provider).
func startedIntent(orderStatus state.Order) state.Intent {
	if orderStatus != state.OrderPaying {
		return state.IntentClosed
	}
	return state.IntentOpen
}

// Intent is a provider transaction this system started, still to be settled.
type Intent struct {
	OrderID       uuid.UUID
	TransactionID string       // empty while CREATING
	Status        state.Intent // CREATING or OPEN
	OrderStatus   state.Order
	UpdatedAt     time.Time
}

// UnsettledIntents lists provider transactions started for orders that are
// not paid, not changed for olderThan: reconciliation asks the provider
// about them (a payment whose callbacks were lost, a transaction left open
// by a crash). Oldest first, at most limit.
func (s *Store) UnsettledIntents(ctx context.Context, olderThan string, limit int) ([]Intent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT i.order_id, COALESCE(i.provider_transaction_id, ''), i.status, o.status, i.updated_at
		FROM payment_intent i JOIN orders o ON o.order_id = i.order_id
		WHERE i.status IN ('CREATING', 'OPEN') AND i.updated_at < clock_timestamp() - $1::interval
		  AND o.status NOT IN ('PAID', 'CANCEL_PENDING')
		ORDER BY i.updated_at LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("list unsettled payment intents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Intent, error) {
		var it Intent
		err := r.Scan(&it.OrderID, &it.TransactionID, &it.Status, &it.OrderStatus, &it.UpdatedAt)
		return it, err
	})
}

// SettleIntent records what the provider said of an order's transaction:
// CLOSED (closed or refunded there, or nothing there) or OPEN (still
// payable: looked at again later). A PAID transaction is recorded by Record.
func (s *Store) SettleIntent(ctx context.Context, orderID uuid.UUID, transactionID string, status state.Intent) error {
	if status != state.IntentClosed && status != state.IntentOpen {
		return fmt.Errorf("settle payment intent of %s: status %q is not CLOSED or OPEN", orderID, status)
	}
	_, err := s.pool.Exec(ctx, `UPDATE payment_intent SET status = $3, provider_transaction_id = COALESCE(NULLIF($2, ''), provider_transaction_id),
		updated_at = clock_timestamp() WHERE order_id = $1 AND status IN ('CREATING', 'OPEN')`, orderID, transactionID, status)
	if err != nil {
		return fmt.Errorf("settle payment intent of %s: %w", orderID, err)
	}
	return nil
}
