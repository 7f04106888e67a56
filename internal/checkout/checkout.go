// Package checkout is the gateway's order and payment operations: read an
// order, start its payment at the provider, ask its saga to cancel it, and
// take the provider's signed callbacks. PostgreSQL transitions live in
// internal/payments and internal/orders; what is asked of the sagas goes
// through Sagas (workflows.Sagas over Temporal).
package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/jsonx"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// Sagas is what the service asks of the reservation sagas and refunds.
type Sagas interface {
	// Cancel asks the reservation's saga to cancel its order; a saga that is
	// gone is resumed from m with the cancel as its first signal.
	Cancel(ctx context.Context, m events.OrderCreateRequested, reason string) error
	// Paid tells the reservation's saga that its order was paid (a hint).
	Paid(ctx context.Context, reservationID uuid.UUID, transactionID string) error
	// StartRefund starts a payment's refund (idempotent by the payment).
	StartRefund(ctx context.Context, paymentID uuid.UUID, activityID, skuID int64) error
}

// Verifier checks a provider callback's signature headers over body.
type Verifier func(id, timestamp, signature string, body []byte, now time.Time) error

// Service is the payment API's logic: start a payment, cancel, read an
// order, and take provider callbacks.
type Service struct {
	store       *payments.Store
	pool        *pgxpool.Pool
	provider    payments.Provider
	sagas       Sagas
	verify      Verifier
	callbackURL string
	log         *slog.Logger
	now         func() time.Time
	m           *metrics.Saga
	// seen reads what an earlier delivery of a webhook id left (seenCallback).
	seen func(ctx context.Context, id string, hash []byte) (int, error)
}

// NewService builds the Service; every dependency is required.
func NewService(pool *pgxpool.Pool, provider payments.Provider, sagas Sagas, verify Verifier,
	callbackURL string, log *slog.Logger, m *metrics.Saga) (*Service, error) {
	if pool == nil || provider == nil || sagas == nil || verify == nil || callbackURL == "" || log == nil {
		return nil, errors.New("checkout: nil dependency")
	}
	if m == nil {
		m = metrics.NewSaga(prometheus.NewRegistry())
	}
	s := &Service{store: payments.NewStore(pool, nil), pool: pool, provider: provider, sagas: sagas,
		verify: verify, callbackURL: callbackURL, log: log, now: time.Now, m: m}
	s.seen = s.seenCallback
	return s, nil
}

// SetFailpoints arms the payment transaction's failpoints
// (after_payment_record_insert on the callback path).
func (s *Service) SetFailpoints(fp *failpoint.Set) { s.store = payments.NewStore(s.pool, fp) }

// Errors the API maps to answers.
var (
	// ErrNotFound: no such order for this user (another user's order answers the same).
	ErrNotFound = errors.New("order not found")
)

// StateError means the order is not in a state that allows the operation.
type StateError struct {
	Op     string
	Status string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("cannot %s an order that is %s", e.Op, e.Status)
}

// OrderView is what a user sees of an order.
type OrderView struct {
	OrderID       uuid.UUID  `json:"order_id"`
	ReservationID uuid.UUID  `json:"reservation_id"`
	ActivityID    int64      `json:"activity_id"`
	SKUID         int64      `json:"sku_id"`
	Status        string     `json:"status"`
	AmountCents   int64      `json:"amount_cents"`
	Currency      string     `json:"currency"` // ISO 4217, the sale's
	ExpiresAt     time.Time  `json:"expires_at"`
	PaidAt        *time.Time `json:"paid_at,omitempty"`
	CancelledAt   *time.Time `json:"cancelled_at,omitempty"`
	// TransactionID is the provider payment started for the order, if any.
	TransactionID string `json:"transaction_id,omitempty"`
}

// Order returns userID's order.
func (s *Service) Order(ctx context.Context, userID int64, orderID uuid.UUID) (OrderView, error) {
	var v OrderView
	var txn *string
	err := s.pool.QueryRow(ctx, `
		SELECT o.order_id, o.reservation_id, o.activity_id, o.sku_id, o.status, o.amount_cents, a.currency, o.expires_at,
		       o.paid_at, o.cancelled_at, i.provider_transaction_id
		FROM orders o JOIN sale_activity a ON a.activity_id = o.activity_id
		LEFT JOIN payment_intent i ON i.order_id = o.order_id
		WHERE o.order_id = $1 AND o.user_id = $2`, orderID, userID).
		Scan(&v.OrderID, &v.ReservationID, &v.ActivityID, &v.SKUID, &v.Status, &v.AmountCents, &v.Currency, &v.ExpiresAt,
			&v.PaidAt, &v.CancelledAt, &txn)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("read order: %w", err)
	}
	if txn != nil {
		v.TransactionID = *txn
	}
	return v, nil
}

// StartPayment starts (or returns the already started) provider payment of
// userID's order: the order moves to PAYING with its payment marked as being
// started, the provider is asked outside any transaction (idempotent by
// order id), and the transaction is handed out only if the order is still
// PAYING then; if a cancel got there first, the transaction is closed at the
// provider and the answer is a state error (see payments.BeginPayment).
func (s *Service) StartPayment(ctx context.Context, userID int64, orderID uuid.UUID) (payments.ProviderPayment, error) {
	o, err := s.Order(ctx, userID, orderID)
	if err != nil {
		return payments.ProviderPayment{}, err
	}
	st, ok, err := s.store.BeginPayment(ctx, orderID)
	if err != nil {
		return payments.ProviderPayment{}, err
	}
	if !ok {
		return payments.ProviderPayment{}, &StateError{"pay", st}
	}
	p, err := s.provider.Create(ctx, orderID, o.AmountCents, o.Currency, s.callbackURL)
	if err != nil {
		// The intent stays CREATING: a cancel waits for it a little, then asks
		// the provider by order id, which decides.
		return payments.ProviderPayment{}, fmt.Errorf("create provider payment: %w", err)
	}
	st, ok, err = s.store.OpenPayment(ctx, orderID, s.provider.Name(), p.TransactionID)
	if err != nil {
		return payments.ProviderPayment{}, err
	}
	if !ok {
		if _, cerr := s.provider.Close(ctx, p.TransactionID); cerr != nil {
			s.log.Warn("payment.close_after_cancel_failed", "order_id", orderID, "transaction_id", p.TransactionID, "error", cerr)
		}
		return payments.ProviderPayment{}, &StateError{"pay", st}
	}
	return p, nil
}

// RequestCancel asks the saga to cancel userID's unpaid order; the saga runs
// the same CANCEL_PENDING path as expiry. A saga that is gone (terminated,
// failed) is resumed from PostgreSQL with the cancel as its first signal.
func (s *Service) RequestCancel(ctx context.Context, userID int64, orderID uuid.UUID, reason string) error {
	o, err := s.Order(ctx, userID, orderID)
	if err != nil {
		return err
	}
	if err := cancelRefusal(o.Status); err != nil {
		return err
	}
	m, err := inventory.Message(ctx, s.pool, o.ReservationID)
	if err != nil {
		return err
	}
	return s.sagas.Cancel(ctx, m, reason)
}

// cancelRefusal refuses a user's cancel of an order in status: only a
// CREATED or PAYING order can be cancelled.
func cancelRefusal(status string) error {
	if status != state.OrderCreated.String() && status != state.OrderPaying.String() {
		return &StateError{"cancel", status}
	}
	return nil
}

// CallbackBody is a provider's payment.succeeded callback.
type CallbackBody struct {
	Type            string    `json:"type"`
	EventID         string    `json:"event_id"`
	TransactionID   string    `json:"transaction_id"`
	MerchantOrderID uuid.UUID `json:"merchant_order_id"`
	AmountCents     int64     `json:"amount_cents"`
	Currency        string    `json:"currency"` // ISO 4217
	PaidAt          time.Time `json:"paid_at"`
}

// CallbackError is a refused callback: the HTTP status and why.
type CallbackError struct {
	Status int
	Code   string
	Err    error
}

func (e *CallbackError) Error() string { return e.Code + ": " + e.Err.Error() }

// HandleCallback verifies and applies a provider callback. nil means
// "answer 2xx": applied now or a duplicate that changes nothing. The
// callback is claimed by its webhook id, the payment recorded and the order
// moved to PAID, all in one transaction, before the answer: a concurrent or
// later duplicate waits for that transaction and then changes nothing. Then
// the saga is told (only by the delivery that paid the order); a payment that
// landed after a cancel carries its refund obligation in the same
// transaction, and its refund is started now or by the refund relay.
func (s *Service) HandleCallback(ctx context.Context, h http.Header, body []byte) error {
	id := h.Get("webhook-id")
	if err := s.verify(id, h.Get("webhook-timestamp"), h.Get("webhook-signature"), body, s.now()); err != nil {
		return &CallbackError{http.StatusUnauthorized, "BAD_SIGNATURE", err}
	}
	var cb CallbackBody
	if err := jsonx.Lenient(body, &cb); err != nil || cb.Type != "payment.succeeded" || cb.TransactionID == "" || cb.MerchantOrderID == uuid.Nil {
		return &CallbackError{http.StatusBadRequest, "INVALID_CALLBACK", fmt.Errorf("not a payment.succeeded callback: %v", err)}
	}
	if !payments.IsCurrency(cb.Currency) {
		return &CallbackError{http.StatusBadRequest, "INVALID_CALLBACK", errors.New("currency: required, an ISO 4217 code of three capital letters")}
	}
	hash := sha256.Sum256(body)
	// A delivery already applied is answered from PostgreSQL, before the
	// provider is asked: a replayed callback costs one read, not a provider call.
	switch seen, err := s.seen(ctx, id, hash[:]); {
	case err != nil:
		return err
	case seen == callbackReused:
		return &CallbackError{http.StatusConflict, "WEBHOOK_ID_REUSED", errWebhookReused}
	case seen == callbackApplied:
		return nil
	}
	if err := s.confirm(ctx, cb); err != nil {
		return err
	}
	ev := steps.Evidence{OrderID: cb.MerchantOrderID, Provider: s.provider.Name(), TransactionID: cb.TransactionID,
		AmountCents: cb.AmountCents, Currency: cb.Currency, PaidAt: cb.PaidAt}
	var res steps.RecordResult
	duplicate := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		claimed, err := claimCallback(ctx, tx, id, s.provider.Name(), cb.TransactionID, hash[:])
		if err != nil || !claimed {
			duplicate = !claimed
			return err
		}
		if res, err = s.store.RecordTx(ctx, tx, ev); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE payment_callback SET result = $2, received_at = clock_timestamp() WHERE webhook_id = $1`,
			id, string(res.Outcome))
		return err
	})
	switch {
	case errors.Is(err, errWebhookReused):
		return &CallbackError{http.StatusConflict, "WEBHOOK_ID_REUSED", err}
	case errors.Is(err, payments.ErrUnknownOrder):
		return s.unknownOrder(ctx, id, cb, hash[:])
	case errors.Is(err, payments.ErrAmountMismatch), errors.Is(err, payments.ErrConflict):
		s.log.Error("payment.callback_refused", "webhook_id", id, "transaction_id", cb.TransactionID, "order_id", cb.MerchantOrderID, "error", err)
		return &CallbackError{http.StatusConflict, "PAYMENT_MISMATCH", err}
	case err != nil:
		return fmt.Errorf("record payment: %w", err)
	case duplicate:
		return nil // already applied by an earlier delivery
	}
	s.recorded(ctx, id, cb, res)
	return nil
}

// recorded acts on a payment the callback recorded (committed): it counts
// the outcome, tells the saga of a payment that paid its order, and starts
// the refund of one that is owed back (failures are logged: PostgreSQL
// holds the fact and the refund obligation).
func (s *Service) recorded(ctx context.Context, id string, cb CallbackBody, res steps.RecordResult) {
	result := string(res.Outcome)
	s.m.Payment.WithLabelValues(strings.ToLower(result)).Inc()
	s.log.Info("payment.recorded", "webhook_id", id, "payment_id", res.PaymentID, "order_id", cb.MerchantOrderID, "result", result)
	switch res.Outcome {
	case steps.RecordPaid:
		if err := s.sagas.Paid(ctx, res.ReservationID, cb.TransactionID); err != nil {
			// PostgreSQL holds the fact; the saga reads it on its next step.
			s.log.Warn("payment.signal_failed", "order_id", cb.MerchantOrderID, "error", err)
		}
	case steps.RecordPaidAfterCancel, steps.RecordAlreadyRefunding, steps.RecordDuplicatePayment:
		s.log.Warn("payment.cancel_race_detected", "order_id", cb.MerchantOrderID, "payment_id", res.PaymentID, "result", result)
		if err := s.StartRefund(ctx, res.PaymentID, res.ActivityID, res.SKUID); err != nil {
			// The refund obligation is durable (refund_task): the relay starts it.
			s.log.Warn("payment.refund_start_deferred", "payment_id", res.PaymentID, "error", err)
		}
	}
}

var errWebhookReused = errors.New("webhook id seen before with another body")

// confirm asks the provider about the callback's transaction (by id): it
// must be the provider's for this order, of this amount, and paid. A signed
// callback alone is never enough: whoever holds the webhook secret could
// otherwise pay an order by saying so. A transaction the provider has since
// refunded is still a payment to record (its refund is accounted for), but
// it cannot pay an order that is still open. An unreachable provider is a
// retry (the provider sends the callback again).
func (s *Service) confirm(ctx context.Context, cb CallbackBody) error {
	p, err := s.provider.Get(ctx, cb.TransactionID)
	unconfirmed := func(why string) error {
		s.log.Error("payment.callback_unconfirmed", "transaction_id", cb.TransactionID, "order_id", cb.MerchantOrderID, "why", why)
		return &CallbackError{http.StatusConflict, "PAYMENT_UNCONFIRMED", errors.New(why)}
	}
	switch {
	case errors.Is(err, payments.ErrNoPayment):
		return unconfirmed("the provider has no such transaction")
	case err != nil:
		return fmt.Errorf("confirm transaction %s at the provider: %w", cb.TransactionID, err)
	case p.OrderID != cb.MerchantOrderID:
		return unconfirmed("the transaction belongs to another order at the provider")
	case p.AmountCents != cb.AmountCents || p.Currency != cb.Currency:
		return unconfirmed("the provider holds another amount or currency for the transaction")
	case p.Status == "REFUNDED":
		var status state.Order
		err := s.pool.QueryRow(ctx, `SELECT status FROM orders WHERE order_id = $1`, cb.MerchantOrderID).Scan(&status)
		switch {
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read order %s: %w", cb.MerchantOrderID, err)
		case status == state.OrderCreated || status == state.OrderPaying:
			return unconfirmed("the provider says the transaction was refunded: it cannot pay an open order")
		}
	case p.Status != "PAID":
		return unconfirmed("the provider says the transaction is " + string(p.Status))
	}
	return nil
}

// claimCallback takes the callback's webhook id for this transaction: true
// when this delivery must be applied (first seen, or seen before only for an
// order that did not exist yet), false for a duplicate of an applied one.
func claimCallback(ctx context.Context, tx pgx.Tx, id, provider, txn string, hash []byte) (bool, error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO payment_callback (webhook_id, provider, provider_transaction_id, body_hash, result)
		VALUES ($1, $2, $3, $4, 'PROCESSING')
		ON CONFLICT (webhook_id) DO NOTHING`, id, provider, txn, hash)
	if err != nil {
		return false, fmt.Errorf("claim callback %s: %w", id, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var prior []byte
	var result string
	if err := tx.QueryRow(ctx, `SELECT body_hash, result FROM payment_callback WHERE webhook_id = $1 FOR UPDATE`, id).Scan(&prior, &result); err != nil {
		return false, fmt.Errorf("read callback %s: %w", id, err)
	}
	if string(prior) != string(hash) {
		return false, errWebhookReused
	}
	return result == resultUnknownOrder, nil
}

const resultUnknownOrder = "UNKNOWN_ORDER"

// What an earlier delivery of a webhook id left (seenCallback).
const (
	callbackNew     = iota // none, or one still to apply (in progress, unknown order)
	callbackApplied        // applied: this delivery is a duplicate
	callbackReused         // the id came with another body
)

// seenCallback reads what an earlier delivery of webhook id left, without a
// lock: claimCallback decides under the row lock for a delivery that goes on.
func (s *Service) seenCallback(ctx context.Context, id string, hash []byte) (int, error) {
	var prior []byte
	var result string
	err := s.pool.QueryRow(ctx, `SELECT body_hash, result FROM payment_callback WHERE webhook_id = $1`, id).Scan(&prior, &result)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return callbackNew, nil
	case err != nil:
		return 0, fmt.Errorf("read callback %s: %w", id, err)
	case string(prior) != string(hash):
		return callbackReused, nil
	case result == resultUnknownOrder || result == "PROCESSING":
		return callbackNew, nil
	}
	return callbackApplied, nil
}

// WebhookRef is what logs name an unverified webhook id (or any other
// client-chosen id) by: a short hash, whatever the sender put in the header
// (bounded lines, no injected text).
func WebhookRef(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:8])
}

// unknownOrder keeps a callback for an order we do not know (evidence) and
// refuses it, so the provider retries; it never creates an order.
func (s *Service) unknownOrder(ctx context.Context, id string, cb CallbackBody, hash []byte) error {
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO payment_callback (webhook_id, provider, provider_transaction_id, body_hash, result)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (webhook_id) DO UPDATE SET received_at = clock_timestamp() WHERE payment_callback.result = $5`,
		id, s.provider.Name(), cb.TransactionID, hash, resultUnknownOrder); err != nil {
		return fmt.Errorf("record callback: %w", err)
	}
	s.log.Warn("payment.callback_unknown_order", "webhook_id", id, "transaction_id", cb.TransactionID, "order_id", cb.MerchantOrderID)
	return &CallbackError{http.StatusNotFound, "UNKNOWN_ORDER", payments.ErrUnknownOrder}
}

// StartRefund starts the payment's refund workflow (idempotent by its ID).
func (s *Service) StartRefund(ctx context.Context, paymentID uuid.UUID, activityID, skuID int64) error {
	return s.sagas.StartRefund(ctx, paymentID, activityID, skuID)
}
