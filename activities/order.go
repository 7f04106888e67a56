package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/state"
)

// Outcome is the business result of CreateOrder.
type Outcome string

// Outcomes of CreateOrder. None of them is an error: they are decisions.
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

// Rejection reasons recorded in inventory_reservation.reason_code.
const (
	ReasonDeadline        = "BUSINESS_DEADLINE_EXCEEDED"
	ReasonStockExhausted  = "STOCK_EXHAUSTED"
	ReasonDuplicateOrder  = "DUPLICATE_ORDER"
	ReasonPayloadConflict = "PAYLOAD_CONFLICT"
	ReasonUnknownSKU      = "UNKNOWN_SKU"
)

// CreateOrderResult is what CreateOrder decided.
type CreateOrderResult struct {
	Outcome   Outcome
	OrderID   uuid.UUID
	ExpiresAt time.Time
	Reason    string
	// Duplicate is true when the inbox already held this message: the result
	// is the one recorded by the first processing.
	Duplicate bool
}

// ErrCommitUnknown marks a commit whose outcome could not be established; the
// activity is retried with the same message_id, never compensated (seed §9.8).
var ErrCommitUnknown = errors.New("transaction commit outcome unknown")

// PayloadHash is the inbox hash of a message: SHA-256 of its business bytes.
func PayloadHash(m events.OrderCreateRequested) []byte {
	h := sha256.Sum256(m.BusinessBytes())
	return h[:]
}

// OrderID is the fixed order id of a reservation.
func OrderID(reservationID uuid.UUID) uuid.UUID { return ids.Named("ORDER", reservationID) }

// CreateOrder runs the order transaction of seed §9.3 in one PostgreSQL
// transaction: inbox first, reservation row lock, status switch, deadline,
// conditional stock update, order insert, ledger, outbox. At-least-once safe:
// every retry and every duplicate delivery lands on the same rows.
func (a *Activities) CreateOrder(ctx context.Context, m events.OrderCreateRequested) (CreateOrderResult, error) {
	if err := m.Validate(); err != nil {
		return CreateOrderResult{Outcome: OutcomeManual, Reason: "INVALID_MESSAGE: " + err.Error()}, nil
	}
	hash := PayloadHash(m)
	tx, err := a.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return CreateOrderResult{}, fmt.Errorf("begin order tx: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit

	res, done, err := a.orderTx(ctx, tx, m, hash)
	if err != nil {
		return CreateOrderResult{}, err
	}
	if done { // duplicate: nothing to commit
		a.count(res)
		return res, nil
	}
	err = tx.Commit(ctx)
	if err == nil {
		if ferr := a.fp.Check(failpoint.DuringCommitResponse); ferr != nil {
			err = ferr // the commit happened, but we act as if its answer was lost
		}
	}
	if err != nil {
		a.m.CommitUnknown.Inc()
		res, err := a.resolveCommitOutcome(ctx, m, hash, err)
		if err == nil {
			a.count(res)
		}
		return res, err
	}
	a.count(res)
	a.log.Info("order.transaction_committed", "reservation_id", m.ReservationID, "message_id", m.MessageID,
		"order_id", res.OrderID, "result", res.Outcome, "reason", res.Reason)
	if err := a.fp.Check(failpoint.AfterPGCommitBeforeAck); err != nil {
		return CreateOrderResult{}, err // committed; Temporal never hears: the retry finds the inbox row
	}
	return res, nil
}

// orderTx does the work inside tx. done=true means no commit is needed.
func (a *Activities) orderTx(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested, hash []byte) (CreateOrderResult, bool, error) {
	tag, err := tx.Exec(ctx, `
		INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'PROCESSING')
		ON CONFLICT (consumer_group, message_id) DO NOTHING`,
		OrderConsumerGroup, m.MessageID, a.Topic, m.EventType, m.ReservationID, m.RequestID, hash)
	if err != nil {
		return CreateOrderResult{}, false, fmt.Errorf("insert inbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		res, err := a.recorded(ctx, tx, m.MessageID, hash)
		return res, true, err
	}
	if err := a.fp.Check(failpoint.AfterInboxInsert); err != nil {
		return CreateOrderResult{}, false, err
	}

	if _, err := tx.Exec(ctx, `
		INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', $7, $8)
		ON CONFLICT (reservation_id) DO NOTHING`,
		m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline); err != nil {
		return CreateOrderResult{}, false, fmt.Errorf("upsert reservation: %w", err)
	}
	var status state.Reservation
	var orderID *uuid.UUID
	if err := tx.QueryRow(ctx, `SELECT status, order_id FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE`,
		m.ReservationID).Scan(&status, &orderID); err != nil {
		return CreateOrderResult{}, false, fmt.Errorf("lock reservation: %w", err)
	}

	var res CreateOrderResult
	switch status {
	case state.ReservationOrderCreated:
		res = CreateOrderResult{Outcome: OutcomeCreated, OrderID: *orderID}
		if err := tx.QueryRow(ctx, `SELECT expires_at FROM orders WHERE order_id = $1`, *orderID).Scan(&res.ExpiresAt); err != nil {
			return CreateOrderResult{}, false, fmt.Errorf("read order: %w", err)
		}
	case state.ReservationOrderRejected, state.ReservationCompensating, state.ReservationCompensated, state.ReservationCancelled:
		// A durable decision was taken before this message: no order, and the
		// existing compensation task (fixed key) is the only compensation.
		res = CreateOrderResult{Outcome: OutcomeLate, Reason: "LATE_AFTER_" + string(status)}
	case state.ReservationManualReview:
		res = CreateOrderResult{Outcome: OutcomeManual, Reason: "RESERVATION_UNDER_REVIEW"}
	case state.ReservationReserved:
		res, err = a.createOrReject(ctx, tx, m)
		if err != nil {
			return CreateOrderResult{}, false, err
		}
	default:
		return CreateOrderResult{}, false, fmt.Errorf("reservation %s in unknown status %q", m.ReservationID, status)
	}
	if _, err := tx.Exec(ctx, `UPDATE consumer_inbox SET result_code = $3, order_id = $4, processed_at = clock_timestamp()
		WHERE consumer_group = $1 AND message_id = $2`,
		OrderConsumerGroup, m.MessageID, resultCode(res), nullUUID(res.OrderID)); err != nil {
		return CreateOrderResult{}, false, fmt.Errorf("finish inbox: %w", err)
	}
	return res, false, nil
}

func (a *Activities) createOrReject(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested) (CreateOrderResult, error) {
	var now, expires time.Time
	var price int64
	err := tx.QueryRow(ctx, `
		SELECT clock_timestamp(), clock_timestamp() + make_interval(secs => a.payment_timeout_seconds), i.price_cents
		FROM sale_activity a JOIN sku_inventory i ON i.activity_id = a.activity_id
		WHERE a.activity_id = $1 AND i.sku_id = $2`, m.ActivityID, m.SKUID).Scan(&now, &expires, &price)
	if errors.Is(err, pgx.ErrNoRows) {
		return a.reject(ctx, tx, m, ReasonUnknownSKU)
	}
	if err != nil {
		return CreateOrderResult{}, fmt.Errorf("read sale: %w", err)
	}
	// Past the hard business deadline (not merely slow): durable rejection (seed §11.2).
	if now.After(m.BusinessDeadline) {
		return a.reject(ctx, tx, m, ReasonDeadline)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE sku_inventory
		SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1,
		    version = version + 1, updated_at = clock_timestamp()
		WHERE activity_id = $1 AND sku_id = $2 AND available_stock > 0`, m.ActivityID, m.SKUID)
	if err != nil {
		return CreateOrderResult{}, fmt.Errorf("take final stock: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return a.reject(ctx, tx, m, ReasonStockExhausted)
	}
	if err := a.fp.Check(failpoint.AfterPGStockDecrement); err != nil {
		return CreateOrderResult{}, err
	}
	orderID := OrderID(m.ReservationID)
	tag, err = tx.Exec(ctx, `
		INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'CREATED', $8)
		ON CONFLICT DO NOTHING`,
		orderID, m.ActivityID, m.SKUID, m.UserID, m.RequestID, m.ReservationID, price, expires)
	if err != nil {
		return CreateOrderResult{}, fmt.Errorf("insert order: %w", err)
	}
	if tag.RowsAffected() == 0 {
		// One order per (activity, sku, user): give the unit back inside this
		// same transaction, so nobody ever sees it taken.
		if _, err := tx.Exec(ctx, `
			UPDATE sku_inventory
			SET available_stock = available_stock + 1, occupied_stock = occupied_stock - 1,
			    version = version + 1, updated_at = clock_timestamp()
			WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0`, m.ActivityID, m.SKUID); err != nil {
			return CreateOrderResult{}, fmt.Errorf("restore stock after duplicate order: %w", err)
		}
		return a.reject(ctx, tx, m, ReasonDuplicateOrder)
	}
	if err := a.fp.Check(failpoint.AfterOrderInsert); err != nil {
		return CreateOrderResult{}, err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied)
		VALUES ($5, $2, $3, $1, $4, 'OCCUPY', -1, 1)`,
		m.ReservationID, m.ActivityID, m.SKUID, orderID, "OCCUPY:"+m.ReservationID.String()); err != nil {
		return CreateOrderResult{}, fmt.Errorf("ledger occupy: %w", err)
	}
	tag, err = tx.Exec(ctx, `
		UPDATE inventory_reservation SET status = 'ORDER_CREATED', order_id = $2, version = version + 1, updated_at = clock_timestamp()
		WHERE reservation_id = $1 AND status = 'RESERVED'`, m.ReservationID, orderID)
	if err != nil || tag.RowsAffected() != 1 {
		return CreateOrderResult{}, fmt.Errorf("reservation %s RESERVED → ORDER_CREATED moved %d rows: %v", m.ReservationID, tag.RowsAffected(), err)
	}
	if err := outbox.Insert(ctx, tx, "ORDER", orderID, "ORDER_CREATED", m.ReservationID.String(), map[string]any{
		"order_id": orderID, "reservation_id": m.ReservationID, "activity_id": m.ActivityID, "sku_id": m.SKUID,
		"user_id": m.UserID, "amount_cents": price, "expires_at": expires,
	}); err != nil {
		return CreateOrderResult{}, err
	}
	return CreateOrderResult{Outcome: OutcomeCreated, OrderID: orderID, ExpiresAt: expires}, nil
}

// reject durably records ORDER_REJECTED with its compensation task and
// outbox event in the caller's transaction (seed §9.4).
func (a *Activities) reject(ctx context.Context, tx pgx.Tx, m events.OrderCreateRequested, reason string) (CreateOrderResult, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE inventory_reservation SET status = 'ORDER_REJECTED', reason_code = $2, version = version + 1, updated_at = clock_timestamp()
		WHERE reservation_id = $1 AND status = 'RESERVED'`, m.ReservationID, reason)
	if err != nil || tag.RowsAffected() != 1 {
		return CreateOrderResult{}, fmt.Errorf("reservation %s RESERVED → ORDER_REJECTED moved %d rows: %v", m.ReservationID, tag.RowsAffected(), err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
		VALUES ($1, $2, 'RELEASE_REDIS_RESERVATION', $3)
		ON CONFLICT (idempotency_key) DO NOTHING`,
		CompensationTaskID(m.ReservationID), m.ReservationID, CompensationKey(m.ReservationID)); err != nil {
		return CreateOrderResult{}, fmt.Errorf("insert compensation task: %w", err)
	}
	if err := outbox.Insert(ctx, tx, "RESERVATION", m.ReservationID, "RESERVATION_COMPENSATE_REQUIRED", m.ReservationID.String(), map[string]any{
		"reservation_id": m.ReservationID, "activity_id": m.ActivityID, "sku_id": m.SKUID, "reason": reason,
	}); err != nil {
		return CreateOrderResult{}, err
	}
	a.log.Info("order.rejected", "reservation_id", m.ReservationID, "message_id", m.MessageID, "reason", reason)
	return CreateOrderResult{Outcome: OutcomeRejected, Reason: reason}, nil
}

// CompensationKey is the fixed idempotency key (and Redis compensation id)
// of a reservation's Redis release.
func CompensationKey(rid uuid.UUID) string { return "RELEASE_REDIS_RESERVATION:" + rid.String() }

// CompensationTaskID is the fixed compensation_task id of a reservation.
func CompensationTaskID(rid uuid.UUID) uuid.UUID { return ids.Named("COMPENSATION_TASK", rid) }

// count records a CreateOrder outcome in seckill_order_create_total.
func (a *Activities) count(r CreateOrderResult) {
	label := map[Outcome]string{OutcomeCreated: "created", OutcomeLate: "late", OutcomeManual: "manual"}[r.Outcome]
	switch {
	case r.Duplicate:
		label = "duplicate"
	case r.Outcome == OutcomeRejected:
		label = map[string]string{ReasonStockExhausted: "rejected_stock", ReasonDeadline: "rejected_deadline",
			ReasonDuplicateOrder: "rejected_duplicate_order", ReasonUnknownSKU: "rejected_unknown_sku"}[r.Reason]
	}
	if label != "" {
		a.m.OrderCreate.WithLabelValues(label).Inc()
	}
}

// querier is what both a transaction and a pool offer for reads.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// recorded returns the result of an earlier processing of messageID, or
// OutcomeManual when the same message_id came with a different payload.
func (a *Activities) recorded(ctx context.Context, q querier, messageID uuid.UUID, hash []byte) (CreateOrderResult, error) {
	var prior []byte
	var code string
	var orderID *uuid.UUID
	var expires *time.Time
	err := q.QueryRow(ctx, `
		SELECT i.payload_hash, i.result_code, i.order_id, o.expires_at
		FROM consumer_inbox i LEFT JOIN orders o ON o.order_id = i.order_id
		WHERE i.consumer_group = $1 AND i.message_id = $2`, OrderConsumerGroup, messageID).Scan(&prior, &code, &orderID, &expires)
	if err != nil {
		return CreateOrderResult{}, fmt.Errorf("read inbox of %s: %w", messageID, err)
	}
	if !bytes.Equal(prior, hash) {
		a.m.InboxPayloadConflict.Inc()
		a.log.Error("order.inbox_payload_conflict", "message_id", messageID, "error_class", "payload_conflict")
		return CreateOrderResult{Outcome: OutcomeManual, Reason: ReasonPayloadConflict, Duplicate: true}, nil
	}
	if code == "PROCESSING" {
		return CreateOrderResult{}, fmt.Errorf("inbox of %s still PROCESSING outside its transaction", messageID)
	}
	out, reason := parseResultCode(code)
	res := CreateOrderResult{Outcome: out, Reason: reason, Duplicate: true}
	if orderID != nil {
		res.OrderID = *orderID
	}
	if expires != nil {
		res.ExpiresAt = *expires
	}
	a.log.Info("order.consumer_duplicate", "message_id", messageID, "result", code)
	return res, nil
}

// resolveCommitOutcome settles a commit that returned an error: the
// transaction may have committed. It asks PostgreSQL on a fresh connection
// by the stable key (consumer_group, message_id) and never compensates.
func (a *Activities) resolveCommitOutcome(ctx context.Context, m events.OrderCreateRequested, hash []byte, commitErr error) (CreateOrderResult, error) {
	a.log.Warn("order.commit_unknown", "reservation_id", m.ReservationID, "message_id", m.MessageID, "error", commitErr)
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	var exists bool
	if err := a.verify.QueryRow(vctx, `SELECT EXISTS (SELECT 1 FROM consumer_inbox WHERE consumer_group = $1 AND message_id = $2)`,
		OrderConsumerGroup, m.MessageID).Scan(&exists); err != nil {
		return CreateOrderResult{}, fmt.Errorf("%w: commit error %v, verify error %v", ErrCommitUnknown, commitErr, err)
	}
	if !exists {
		// Rolled back: the retry re-runs the whole transaction with the same IDs.
		return CreateOrderResult{}, fmt.Errorf("%w: commit error %v, no inbox row: retry", ErrCommitUnknown, commitErr)
	}
	return a.recorded(vctx, a.verify, m.MessageID, hash)
}

func resultCode(r CreateOrderResult) string {
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

// RejectInput names a reservation reconciliation found past its deadline.
type RejectInput struct {
	ReservationID uuid.UUID
	// Grace is how long past business_deadline the reservation must be.
	Grace time.Duration
	// Unseen, when set, is the reservation as Redis holds it, for one that
	// PostgreSQL may never have seen (its message never reached CreateOrder):
	// its row is recorded from it first, so that the rejection is durable and
	// a message arriving later finds it.
	Unseen *events.OrderCreateRequested
}

// RejectOverdue durably rejects a reservation that is still RESERVED in
// PostgreSQL (or not there at all, see RejectInput.Unseen) past its business
// deadline (seed §11.2, §13.5): ORDER_REJECTED with BUSINESS_DEADLINE_EXCEEDED,
// its compensation task and outbox event, in one transaction, by CAS. A
// message arriving later finds the rejection and creates no order. It returns
// the reservation's status afterwards.
func (a *Activities) RejectOverdue(ctx context.Context, in RejectInput) (state.Reservation, error) {
	if in.Unseen != nil {
		if err := in.Unseen.Validate(); err != nil {
			return "", fmt.Errorf("reject %s: %w", in.ReservationID, err)
		}
		if in.Unseen.ReservationID != in.ReservationID {
			return "", fmt.Errorf("reject %s: the Redis reservation is %s", in.ReservationID, in.Unseen.ReservationID)
		}
	}
	var status state.Reservation
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if m := in.Unseen; m != nil {
			if _, err := tx.Exec(ctx, `
				INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
				VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', $7, $8)
				ON CONFLICT (reservation_id) DO NOTHING`,
				m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline); err != nil {
				return fmt.Errorf("record unseen reservation %s: %w", m.ReservationID, err)
			}
		}
		var m events.OrderCreateRequested
		var overdue bool
		err := tx.QueryRow(ctx, `
			SELECT status, activity_id, sku_id, message_id, business_deadline < clock_timestamp() - $2::interval
			FROM inventory_reservation WHERE reservation_id = $1 FOR UPDATE`, in.ReservationID, in.Grace.String()).
			Scan(&status, &m.ActivityID, &m.SKUID, &m.MessageID, &overdue)
		if err != nil {
			return fmt.Errorf("lock reservation %s: %w", in.ReservationID, err)
		}
		if status == state.ReservationReserved && !overdue && in.Unseen != nil {
			return errNotOverdue // leave no row behind: CreateOrder records it when the message comes
		}
		if status != state.ReservationReserved || !overdue {
			return nil
		}
		m.ReservationID = in.ReservationID
		if _, err := a.reject(ctx, tx, m, ReasonDeadline); err != nil {
			return err
		}
		status = state.ReservationOrderRejected
		return nil
	})
	if errors.Is(err, errNotOverdue) {
		return state.ReservationReserved, nil
	}
	return status, err
}

var errNotOverdue = errors.New("reservation not past its deadline yet")
