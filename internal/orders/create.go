package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/state/steps"
)

// ConsumerGroup is the consumer_inbox group of the order transaction: the
// order service's idempotency record for ORDER_CREATE_REQUESTED.
const ConsumerGroup = "order-create"

// ErrCommitUnknown marks a commit whose outcome could not be established; the
// caller retries with the same message_id, never compensates (docs/spec.md#commit-unknown).
var ErrCommitUnknown = errors.New("transaction commit outcome unknown")

// Store runs the order transaction.
type Store struct {
	pool *pgxpool.Pool
	// verify is a separate pool used to resolve an unknown commit outcome on
	// a fresh connection.
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

// Create runs the order transaction (docs/spec.md#order-transaction) as one call of the
// server-side function seckill_create_order (migrations/00012_create_order_no_failpoints.sql):
// inbox first, reservation row lock, status switch, deadline, order insert,
// ledger, outbox, and the conditional stock update last, in one autocommit
// statement: one round trip, and the hot stock row locked from its update to
// the commit only. At-least-once safe: every retry and every duplicate
// delivery lands on the same rows.
func (s *Store) Create(ctx context.Context, m events.OrderCreateRequested) (steps.CreateOrderResult, error) {
	if err := m.Validate(); err != nil {
		return steps.CreateOrderResult{Outcome: steps.OutcomeManual, Reason: "INVALID_MESSAGE: " + err.Error()}, nil
	}
	hash := inbox.PayloadHash(m)
	inner := []string{failpoint.AfterInboxInsert, failpoint.AfterOrderInsert, failpoint.AfterPGStockDecrement}
	if err := s.prepareFailpoints(ctx, inner); err != nil {
		return steps.CreateOrderResult{}, fmt.Errorf("order transaction of message %s: %w", m.MessageID, err)
	}
	fail := s.fp.Next(inner...)
	query, extra, err := s.createStatement(ctx, fail.Name)
	if err != nil {
		s.fp.Unfire(fail)
		return steps.CreateOrderResult{}, fmt.Errorf("order transaction of message %s: %w", m.MessageID, err)
	}
	row, err := s.call(ctx, query, m, hash, extra)
	kind := classifyCall(err)
	if kind != callFailpoint {
		s.fp.Unfire(fail) // the function took another path: the failpoint waits for the next pass
	}
	switch {
	case err == nil && row.duplicate:
		res, err := s.recorded(ctx, m.MessageID, hash, row.record())
		if err == nil {
			s.count(res)
		}
		return res, err
	case err == nil:
		err = s.fp.Check(failpoint.DuringCommitResponse) // committed, but we act as if its answer was lost
	case kind == callFailpoint:
		return steps.CreateOrderResult{}, s.fp.Fire(fail) // rolled back where the failpoint stood
	case kind == callRefused:
		return steps.CreateOrderResult{}, fmt.Errorf("order transaction of message %s: %w", m.MessageID, err)
	}
	if err != nil {
		s.m.CommitUnknown.Inc()
		res, err := s.resolveCommitOutcome(ctx, m, hash, err)
		if err == nil {
			s.count(res)
		}
		return res, err
	}
	res := row.result()
	s.count(res)
	if res.Outcome == steps.OutcomeRejected {
		s.log.InfoContext(ctx, "order.rejected", "reservation_id", m.ReservationID, "message_id", m.MessageID, "reason", res.Reason)
	}
	s.log.InfoContext(ctx, "order.transaction_committed", "reservation_id", m.ReservationID, "message_id", m.MessageID,
		"order_id", res.OrderID, "result", res.Outcome, "reason", res.Reason)
	if err := s.fp.Check(failpoint.AfterPGCommitBeforeAck); err != nil {
		return steps.CreateOrderResult{}, err // committed; the caller never hears: the retry finds the inbox row
	}
	return res, nil
}

// callKind is what the order transaction's error says of its outcome.
type callKind int

const (
	callDone      callKind = iota // no error: committed
	callFailpoint                 // the failpoint raised SK001: rolled back there
	callRefused                   // the server refused the statement (rolled back) or never got it
	callUnknown                   // anything else: the commit may have happened (docs/spec.md#a-commit-whose-outcome-is-unknown)
)

// classifyCall classifies the error of seckill_create_order's call.
func classifyCall(err error) callKind {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return callDone
	case errors.As(err, &pgErr) && pgErr.Code == sqlStateFailpoint:
		return callFailpoint
	case errors.As(err, &pgErr), pgconn.SafeToRetry(err):
		return callRefused
	}
	return callUnknown
}

// sqlStateFailpoint is what the order transaction fails with where an inner
// failpoint stood. Only a build with -tags failpoints can make it do so
// (create_failpoints.go); seckill_create_order itself has no failpoint.
const sqlStateFailpoint = "SK001"

// createSQL calls the order transaction; its arguments are in the order of
// the function's parameters.
const createSQL = `SELECT o_outcome, o_reason, o_order_id, o_expires_at, o_duplicate, o_hash, o_code
	FROM seckill_create_order($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`

// fnRow is what seckill_create_order returns.
type fnRow struct {
	outcome, reason *string
	orderID         *uuid.UUID
	expiresAt       *time.Time
	duplicate       bool
	hash            []byte  // duplicate: the recorded payload hash
	code            *string // duplicate: the recorded result code
}

// call runs query (createSQL, or what createStatement chose) with the
// function's arguments, then extra.
func (s *Store) call(ctx context.Context, query string, m events.OrderCreateRequested, hash []byte, extra []any) (fnRow, error) {
	rid := m.ReservationID
	orderID := ID(rid)
	args := append([]any{ConsumerGroup, s.topic, m.MessageID, m.EventType,
		rid, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.ReservedAt, m.BusinessDeadline, hash,
		orderID, outbox.EventID("ORDER_CREATED", orderID), inventory.LedgerOccupyKey(rid),
		inventory.CompensationTaskID(rid), inventory.CompensationKey(rid),
		outbox.EventID("RESERVATION_COMPENSATE_REQUIRED", rid)}, extra...)
	var r fnRow
	err := s.pool.QueryRow(ctx, query, args...).Scan(&r.outcome, &r.reason, &r.orderID, &r.expiresAt, &r.duplicate, &r.hash, &r.code)
	return r, err
}

func (r fnRow) result() steps.CreateOrderResult {
	res := steps.CreateOrderResult{Outcome: steps.OrderOutcome(deref(r.outcome)), Reason: deref(r.reason)}
	if r.orderID != nil {
		res.OrderID = *r.orderID
	}
	if r.expiresAt != nil {
		res.ExpiresAt = *r.expiresAt
	}
	return res
}

func (r fnRow) record() inbox.Record {
	return inbox.Record{Hash: r.hash, Code: deref(r.code), OrderID: r.orderID, ExpiresAt: r.expiresAt}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// count records a Create outcome in seckill_order_create_total.
func (s *Store) count(r steps.CreateOrderResult) {
	label := map[steps.OrderOutcome]string{steps.OutcomeCreated: "created", steps.OutcomeLate: "late", steps.OutcomeManual: "manual"}[r.Outcome]
	switch {
	case r.Duplicate:
		label = "duplicate"
	case r.Outcome == steps.OutcomeRejected:
		label = map[string]string{steps.ReasonStockExhausted: "rejected_stock", steps.ReasonDeadline: "rejected_deadline",
			steps.ReasonDuplicateOrder: "rejected_duplicate_order", steps.ReasonUnknownSKU: "rejected_unknown_sku",
			steps.ReasonUserCap: "rejected_user_cap"}[r.Reason]
	}
	if label != "" {
		s.m.OrderCreate.WithLabelValues(label).Inc()
	}
}

// recorded returns the result an earlier processing of messageID recorded
// in rec, or OutcomeManual when the same message_id came with a different
// payload.
func (s *Store) recorded(ctx context.Context, messageID uuid.UUID, hash []byte, rec inbox.Record) (steps.CreateOrderResult, error) {
	if !rec.Same(hash) {
		s.m.InboxPayloadConflict.Inc()
		s.log.ErrorContext(ctx, "order.inbox_payload_conflict", "message_id", messageID, "error_class", "payload_conflict")
		return steps.CreateOrderResult{Outcome: steps.OutcomeManual, Reason: steps.ReasonPayloadConflict, Duplicate: true}, nil
	}
	if rec.Code == "PROCESSING" {
		return steps.CreateOrderResult{}, fmt.Errorf("inbox of %s still PROCESSING outside its transaction", messageID)
	}
	out, reason := parseResultCode(rec.Code)
	res := steps.CreateOrderResult{Outcome: out, Reason: reason, Duplicate: true}
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
func (s *Store) resolveCommitOutcome(ctx context.Context, m events.OrderCreateRequested, hash []byte, commitErr error) (steps.CreateOrderResult, error) {
	s.log.WarnContext(ctx, "order.commit_unknown", "reservation_id", m.ReservationID, "message_id", m.MessageID, "error", commitErr)
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	exists, err := inbox.Exists(vctx, s.verify, ConsumerGroup, m.MessageID)
	if err != nil {
		return steps.CreateOrderResult{}, fmt.Errorf("%w: commit error: %w; verify error: %w", ErrCommitUnknown, commitErr, err)
	}
	if !exists {
		// Rolled back: the retry re-runs the whole transaction with the same IDs.
		return steps.CreateOrderResult{}, fmt.Errorf("%w: commit error: %w; no inbox row: retry", ErrCommitUnknown, commitErr)
	}
	rec, err := inbox.Lookup(vctx, s.verify, ConsumerGroup, m.MessageID)
	if err != nil {
		return steps.CreateOrderResult{}, fmt.Errorf("%w: commit error: %w; verify error: %w", ErrCommitUnknown, commitErr, err)
	}
	return s.recorded(vctx, m.MessageID, hash, rec)
}

func parseResultCode(code string) (steps.OrderOutcome, string) {
	o, reason, _ := strings.Cut(code, ":")
	return steps.OrderOutcome(o), reason
}
