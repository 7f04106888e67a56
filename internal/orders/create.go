package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/pg"
	"github.com/seckill/seckill/state"
)

// ConsumerGroup is the consumer_inbox group of the order transaction: the
// order service's idempotency record for ORDER_CREATE_REQUESTED.
const ConsumerGroup = "order-create"

// Outcome is the business result of Create.
type Outcome string

// Outcomes of Create. None of them is an error: they are decisions.
const (
	// OutcomeCreated: the order exists (now, or from an earlier delivery).
	OutcomeCreated = Outcome(state.ReservationOrderCreated)
	// OutcomeRejected: PostgreSQL durably rejected the reservation
	// (ORDER_REJECTED + compensation_task + outbox in one transaction).
	OutcomeRejected = Outcome(state.ReservationOrderRejected)
	// OutcomeLate: the reservation was already compensated or cancelled
	// before this message: no order, no second compensation.
	OutcomeLate Outcome = "LATE_AFTER_COMPENSATION"
	// OutcomeManual: automation cannot decide (e.g. same message_id with a
	// different payload, or the reservation is under manual review).
	OutcomeManual = Outcome(state.ReservationManualReview)
)

// CreateResult is what Create decided.
type CreateResult struct {
	Outcome   Outcome
	OrderID   uuid.UUID
	ExpiresAt time.Time
	Reason    string
	// Duplicate is true when the inbox already held this message: the result
	// is the one recorded by the first processing.
	Duplicate bool
}

// ErrCommitUnknown marks a commit whose outcome could not be established; the
// caller retries with the same message_id, never compensates (seed §9.8).
var ErrCommitUnknown = errors.New("transaction commit outcome unknown")

// Store runs the order transaction.
type Store struct {
	pool *pgxpool.Pool
	// verify is a separate pool used to resolve an unknown commit outcome on
	// a fresh connection (seed §9.8).
	verify *pgxpool.Pool
	fp     *failpoint.Set
	log    *slog.Logger
	m      *metrics.Saga
	topic  string
}

// Deps are a Store's dependencies.
type Deps struct {
	Pool   *pgxpool.Pool
	Verify *pgxpool.Pool
	// Topic is where ORDER_CREATE_REQUESTED arrives from (recorded in the inbox).
	Topic      string
	Failpoints *failpoint.Set // may be nil
	Log        *slog.Logger
	Metrics    *metrics.Saga // may be nil: a private registry is used
}

// NewStore returns a Store; Pool, Verify, Topic and Log are required.
func NewStore(d Deps) (*Store, error) {
	if d.Pool == nil || d.Verify == nil || d.Log == nil || d.Topic == "" {
		return nil, errors.New("orders: nil dependency or empty topic")
	}
	if d.Failpoints == nil {
		d.Failpoints = &failpoint.Set{}
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewSaga(prometheus.NewRegistry())
	}
	return &Store{pool: d.Pool, verify: d.Verify, fp: d.Failpoints, log: d.Log, m: d.Metrics, topic: d.Topic}, nil
}

// Create runs the order transaction of seed §9.3 in one PostgreSQL
// transaction: inbox first, reservation row lock, status switch, deadline,
// conditional stock update, order insert, ledger, outbox. At-least-once safe:
// every retry and every duplicate delivery lands on the same rows.
func (s *Store) Create(ctx context.Context, m events.OrderCreateRequested) (CreateResult, error) {
	if err := m.Validate(); err != nil {
		return CreateResult{Outcome: OutcomeManual, Reason: "INVALID_MESSAGE: " + err.Error()}, nil
	}
	hash := inbox.PayloadHash(m)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return CreateResult{}, fmt.Errorf("begin order tx: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit

	res, done, err := s.orderTx(ctx, tx, m, hash)
	if err != nil {
		return CreateResult{}, err
	}
	if done { // duplicate: nothing to commit
		s.count(res)
		return res, nil
	}
	err = tx.Commit(ctx)
	if err == nil {
		if ferr := s.fp.Check(failpoint.DuringCommitResponse); ferr != nil {
			err = ferr // the commit happened, but we act as if its answer was lost
		}
	}
	if err != nil {
		s.m.CommitUnknown.Inc()
		res, err := s.resolveCommitOutcome(ctx, m, hash, err)
		if err == nil {
			s.count(res)
		}
		return res, err
	}
	s.count(res)
	s.log.InfoContext(ctx, "order.transaction_committed", "reservation_id", m.ReservationID, "message_id", m.MessageID,
		"order_id", res.OrderID, "result", res.Outcome, "reason", res.Reason)
	if err := s.fp.Check(failpoint.AfterPGCommitBeforeAck); err != nil {
		return CreateResult{}, err // committed; the caller never hears: the retry finds the inbox row
	}
	return res, nil
}

// orderTx does the work inside tx. done=true means no commit is needed.
func (s *Store) orderTx(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested, hash []byte) (CreateResult, bool, error) {
	claimed, err := inbox.Claim(ctx, tx, inbox.Entry{Group: ConsumerGroup, Topic: s.topic, Message: m, Hash: hash, Code: "PROCESSING"})
	if err != nil {
		return CreateResult{}, false, err
	}
	if !claimed {
		res, err := s.recorded(ctx, tx, m.MessageID, hash)
		return res, true, err
	}
	if err := s.fp.Check(failpoint.AfterInboxInsert); err != nil {
		return CreateResult{}, false, err
	}
	if err := inventory.Record(ctx, tx, m); err != nil {
		return CreateResult{}, false, err
	}
	status, orderID, err := inventory.Lock(ctx, tx, m.ReservationID)
	if err != nil {
		return CreateResult{}, false, err
	}
	res, err := s.decide(ctx, tx, m, status, orderID)
	if err != nil {
		return CreateResult{}, false, err
	}
	if err := inbox.Finish(ctx, tx, ConsumerGroup, m.MessageID, resultCode(res), nullUUID(res.OrderID)); err != nil {
		return CreateResult{}, false, err
	}
	return res, false, nil
}

// decide switches on the reservation's status under its row lock.
func (s *Store) decide(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested, status state.Reservation, orderID *uuid.UUID) (CreateResult, error) {
	switch status {
	case state.ReservationOrderCreated:
		res := CreateResult{Outcome: OutcomeCreated, OrderID: *orderID}
		if err := tx.QueryRow(ctx, `SELECT expires_at FROM orders WHERE order_id = $1`, *orderID).Scan(&res.ExpiresAt); err != nil {
			return CreateResult{}, fmt.Errorf("read order: %w", err)
		}
		return res, nil
	case state.ReservationOrderRejected, state.ReservationCompensating, state.ReservationCompensated, state.ReservationCancelled:
		// A durable decision was taken before this message: no order, and the
		// existing compensation task (fixed key) is the only compensation.
		return CreateResult{Outcome: OutcomeLate, Reason: "LATE_AFTER_" + string(status)}, nil
	case state.ReservationManualReview:
		return CreateResult{Outcome: OutcomeManual, Reason: "RESERVATION_UNDER_REVIEW"}, nil
	case state.ReservationReserved:
		return s.createOrReject(ctx, tx, m)
	}
	return CreateResult{}, fmt.Errorf("reservation %s in unknown status %q", m.ReservationID, status)
}

func (s *Store) createOrReject(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested) (CreateResult, error) {
	var now, expires time.Time
	var price int64
	err := tx.QueryRow(ctx, `
		SELECT clock_timestamp(), clock_timestamp() + make_interval(secs => a.payment_timeout_seconds), i.price_cents
		FROM sale_activity a JOIN sku_inventory i ON i.activity_id = a.activity_id
		WHERE a.activity_id = $1 AND i.sku_id = $2`, m.ActivityID, m.SKUID).Scan(&now, &expires, &price)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.reject(ctx, tx, m, inventory.ReasonUnknownSKU)
	}
	if err != nil {
		return CreateResult{}, fmt.Errorf("read sale: %w", err)
	}
	// Past the hard business deadline (not merely slow): durable rejection (seed §11.2).
	if now.After(m.BusinessDeadline) {
		return s.reject(ctx, tx, m, inventory.ReasonDeadline)
	}
	sku := inventory.SKU{ActivityID: m.ActivityID, SKUID: m.SKUID}
	took, err := inventory.Take(ctx, tx, sku)
	if err != nil {
		return CreateResult{}, err
	}
	if !took {
		return s.reject(ctx, tx, m, inventory.ReasonStockExhausted)
	}
	if err := s.fp.Check(failpoint.AfterPGStockDecrement); err != nil {
		return CreateResult{}, err
	}
	orderID := ID(m.ReservationID)
	inserted, err := Insert(ctx, tx, New{OrderID: orderID, ActivityID: m.ActivityID, SKUID: m.SKUID, UserID: m.UserID,
		RequestID: m.RequestID, ReservationID: m.ReservationID, AmountCents: price, ExpiresAt: expires})
	if err != nil {
		return CreateResult{}, err
	}
	if !inserted {
		// One order per (activity, sku, user): give the unit back inside this
		// same transaction, so nobody ever sees it taken.
		if err := inventory.Untake(ctx, tx, sku); err != nil {
			return CreateResult{}, err
		}
		return s.reject(ctx, tx, m, inventory.ReasonDuplicateOrder)
	}
	if err := s.fp.Check(failpoint.AfterOrderInsert); err != nil {
		return CreateResult{}, err
	}
	if err := inventory.LedgerOccupy(ctx, tx, sku, m.ReservationID, orderID); err != nil {
		return CreateResult{}, err
	}
	if err := inventory.ToOrderCreated(ctx, tx, m.ReservationID, orderID); err != nil {
		return CreateResult{}, err
	}
	if err := outbox.Insert(ctx, tx, "ORDER", orderID, "ORDER_CREATED", m.ReservationID.String(), map[string]any{
		"order_id": orderID, "reservation_id": m.ReservationID, "activity_id": m.ActivityID, "sku_id": m.SKUID,
		"user_id": m.UserID, "amount_cents": price, "expires_at": expires,
	}); err != nil {
		return CreateResult{}, err
	}
	return CreateResult{Outcome: OutcomeCreated, OrderID: orderID, ExpiresAt: expires}, nil
}

// reject durably records ORDER_REJECTED in the caller's transaction.
func (s *Store) reject(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested, reason string) (CreateResult, error) {
	if err := inventory.Reject(ctx, tx, inventory.Subject{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}, reason); err != nil {
		return CreateResult{}, err
	}
	s.log.InfoContext(ctx, "order.rejected", "reservation_id", m.ReservationID, "message_id", m.MessageID, "reason", reason)
	return CreateResult{Outcome: OutcomeRejected, Reason: reason}, nil
}

// count records a Create outcome in seckill_order_create_total.
func (s *Store) count(r CreateResult) {
	label := map[Outcome]string{OutcomeCreated: "created", OutcomeLate: "late", OutcomeManual: "manual"}[r.Outcome]
	switch {
	case r.Duplicate:
		label = "duplicate"
	case r.Outcome == OutcomeRejected:
		label = map[string]string{inventory.ReasonStockExhausted: "rejected_stock", inventory.ReasonDeadline: "rejected_deadline",
			inventory.ReasonDuplicateOrder: "rejected_duplicate_order", inventory.ReasonUnknownSKU: "rejected_unknown_sku"}[r.Reason]
	}
	if label != "" {
		s.m.OrderCreate.WithLabelValues(label).Inc()
	}
}

// recorded returns the result of an earlier processing of messageID, or
// OutcomeManual when the same message_id came with a different payload.
func (s *Store) recorded(ctx context.Context, q pg.Querier, messageID uuid.UUID, hash []byte) (CreateResult, error) {
	rec, err := inbox.Lookup(ctx, q, ConsumerGroup, messageID)
	if err != nil {
		return CreateResult{}, err
	}
	if !rec.Same(hash) {
		s.m.InboxPayloadConflict.Inc()
		s.log.ErrorContext(ctx, "order.inbox_payload_conflict", "message_id", messageID, "error_class", "payload_conflict")
		return CreateResult{Outcome: OutcomeManual, Reason: inventory.ReasonPayloadConflict, Duplicate: true}, nil
	}
	if rec.Code == "PROCESSING" {
		return CreateResult{}, fmt.Errorf("inbox of %s still PROCESSING outside its transaction", messageID)
	}
	out, reason := parseResultCode(rec.Code)
	res := CreateResult{Outcome: out, Reason: reason, Duplicate: true}
	if rec.OrderID != nil {
		res.OrderID = *rec.OrderID
	}
	if rec.ExpiresAt != nil {
		res.ExpiresAt = *rec.ExpiresAt
	}
	s.log.InfoContext(ctx, "order.consumer_duplicate", "message_id", messageID, "result", rec.Code)
	return res, nil
}

// resolveCommitOutcome settles a commit that returned an error: the
// transaction may have committed. It asks PostgreSQL on a fresh connection
// by the stable key (consumer_group, message_id) and never compensates.
func (s *Store) resolveCommitOutcome(ctx context.Context, m events.OrderCreateRequested, hash []byte, commitErr error) (CreateResult, error) {
	s.log.WarnContext(ctx, "order.commit_unknown", "reservation_id", m.ReservationID, "message_id", m.MessageID, "error", commitErr)
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	exists, err := inbox.Exists(vctx, s.verify, ConsumerGroup, m.MessageID)
	if err != nil {
		return CreateResult{}, fmt.Errorf("%w: commit error: %w; verify error: %w", ErrCommitUnknown, commitErr, err)
	}
	if !exists {
		// Rolled back: the retry re-runs the whole transaction with the same IDs.
		return CreateResult{}, fmt.Errorf("%w: commit error: %w; no inbox row: retry", ErrCommitUnknown, commitErr)
	}
	return s.recorded(vctx, s.verify, m.MessageID, hash)
}

func resultCode(r CreateResult) string {
	if r.Reason == "" {
		return string(r.Outcome)
	}
	return string(r.Outcome) + ":" + r.Reason
}

func parseResultCode(code string) (Outcome, string) {
	o, reason, _ := strings.Cut(code, ":")
	return Outcome(o), reason
}

func nullUUID(u uuid.UUID) *uuid.UUID {
	if u == uuid.Nil {
		return nil
	}
	return &u
}
