// Package inventory owns the stock side of a reservation in PostgreSQL:
// inventory_reservation (the reservation's durable status), sku_inventory
// (available/occupied/sold), inventory_ledger (one row per stock move) and
// compensation_task (giving a rejected reservation's Redis unit back). Every
// status change here is a conditional update of state.Reservation or
// state.Compensation whose row count is checked (internal/platform/pg), and the Redis
// projections of those changes (lua/) run from here too.
//
// The tx-level functions take the caller's transaction: the order
// transaction (internal/orders) and the payment transactions
// (internal/payments) combine them with their own rows.
package inventory

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/pg"
)

// CompensationKey is the fixed idempotency key (and Redis compensation id)
// of a reservation's Redis release.
func CompensationKey(rid uuid.UUID) string { return "RELEASE_REDIS_RESERVATION:" + rid.String() }

// CompensationTaskID is the fixed compensation_task id of a reservation.
func CompensationTaskID(rid uuid.UUID) uuid.UUID { return ids.Named("COMPENSATION_TASK", rid) }

// Record writes the reservation's row as RESERVED if PostgreSQL has none
// yet: reconciliation recording one PostgreSQL never saw (the order
// transaction, seckill_create_order, records the first message's itself).
func Record(ctx context.Context, db pg.Execer, m events.OrderCreateRequested) error {
	return pg.Exec(ctx, db, "record reservation "+m.ReservationID.String(), `
		INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
		VALUES ($1, $2, $3, $4, $5, $6, 'RESERVED', $7, $8)
		ON CONFLICT (reservation_id) DO NOTHING`,
		m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline)
}

// Subject names the reservation a rejection is about.
type Subject struct {
	ReservationID uuid.UUID
	ActivityID    int64
	SKUID         int64
}

// Reject durably records ORDER_REJECTED with its compensation task and
// outbox event in the caller's transaction (docs/spec.md#durable-rejection): RESERVED →
// ORDER_REJECTED, a compensation_task with the fixed key, and
// RESERVATION_COMPENSATE_REQUIRED: the rows the order transaction's own
// rejection writes (seckill_create_order). RejectOverdue uses it.
func Reject(ctx context.Context, tx pgx.Tx, s Subject, reason string) error {
	rid := s.ReservationID
	if err := pg.MoveOne(ctx, tx, fmt.Sprintf("reservation %s RESERVED → ORDER_REJECTED", rid), `
		UPDATE inventory_reservation SET status = 'ORDER_REJECTED', reason_code = $2, version = version + 1, updated_at = clock_timestamp()
		WHERE reservation_id = $1 AND status = 'RESERVED'`, rid, reason); err != nil {
		return err
	}
	if err := pg.Exec(ctx, tx, "insert compensation task of "+rid.String(), `
		INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
		VALUES ($1, $2, 'RELEASE_REDIS_RESERVATION', $3)
		ON CONFLICT (idempotency_key) DO NOTHING`,
		CompensationTaskID(rid), rid, CompensationKey(rid)); err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, "RESERVATION", rid, "RESERVATION_COMPENSATE_REQUIRED", rid.String(), map[string]any{
		"reservation_id": rid, "activity_id": s.ActivityID, "sku_id": s.SKUID, "reason": reason,
	})
}

// LedgerOccupyKey is the idempotency key of the ledger row of the unit an
// order took (written by the order transaction, seckill_create_order).
func LedgerOccupyKey(rid uuid.UUID) string { return "OCCUPY:" + rid.String() }

// Cancel moves a cancelled order's reservation ORDER_CREATED → CANCELLED
// (a reservation already moved on is left as it is).
func Cancel(ctx context.Context, tx pgx.Tx, rid uuid.UUID) error {
	return pg.Exec(ctx, tx, fmt.Sprintf("reservation %s → CANCELLED", rid), `
		UPDATE inventory_reservation SET status = 'CANCELLED', version = version + 1, updated_at = clock_timestamp()
		WHERE reservation_id = $1 AND status = 'ORDER_CREATED'`, rid)
}

// RetryCompensation is the repair retry-compensation: task MANUAL → RETRY and
// reservation MANUAL_REVIEW → ORDER_REJECTED, so the standard compensation
// runs again (its Redis marker keeps it at most once).
func RetryCompensation(ctx context.Context, tx pgx.Tx, rid uuid.UUID) error {
	if err := pg.Exec(ctx, tx, "compensation task of "+rid.String()+" → RETRY", `
		UPDATE compensation_task SET status = 'RETRY', lease_owner = NULL, lease_until = NULL,
		    next_retry_at = clock_timestamp(), updated_at = clock_timestamp() WHERE reservation_id = $1 AND status = 'MANUAL'`,
		rid); err != nil {
		return err
	}
	return pg.Exec(ctx, tx, "reservation "+rid.String()+" → ORDER_REJECTED", `
		UPDATE inventory_reservation SET status = 'ORDER_REJECTED', version = version + 1,
		    updated_at = clock_timestamp() WHERE reservation_id = $1 AND status = 'MANUAL_REVIEW'`, rid)
}
