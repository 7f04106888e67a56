package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// Load reads a reservation and its order.
func (s *Store) Load(ctx context.Context, rid uuid.UUID) (steps.ReservationState, error) {
	var st steps.ReservationState
	var reason *string
	var orderStatus *state.Order
	var orderID *uuid.UUID
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT r.status, r.reason_code, o.order_id, o.status, o.expires_at
		FROM inventory_reservation r LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		WHERE r.reservation_id = $1`, rid).Scan(&st.Status, &reason, &orderID, &orderStatus, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return steps.ReservationState{}, nil
	}
	if err != nil {
		return st, fmt.Errorf("read reservation %s: %w", rid, err)
	}
	if reason != nil {
		st.Reason = *reason
	}
	if orderID != nil {
		st.OrderID, st.OrderStatus, st.ExpiresAt = *orderID, *orderStatus, *expires
	}
	return st, nil
}

// Message rebuilds, from PostgreSQL's reservation row, the part of a
// reservation's ORDER_CREATE_REQUESTED a resumed saga needs (ids, sale,
// user, times). It is not the original message (no key version): a resumed
// saga never creates an order from it.
func Message(ctx context.Context, db pg.Querier, rid uuid.UUID) (events.OrderCreateRequested, error) {
	m := events.OrderCreateRequested{SchemaVersion: ids.SchemaVersion, EventType: events.TypeOrderCreateRequested,
		ReservationID: rid, MessageKey: rid.String()}
	var buckets int
	err := db.QueryRow(ctx, `SELECT r.message_id, r.request_id, r.activity_id, r.sku_id, r.user_id, r.reserved_at,
			r.business_deadline, COALESCE(i.buckets, 1)
		FROM inventory_reservation r LEFT JOIN sku_inventory i ON i.activity_id = r.activity_id AND i.sku_id = r.sku_id
		WHERE r.reservation_id = $1`, rid).
		Scan(&m.MessageID, &m.RequestID, &m.ActivityID, &m.SKUID, &m.UserID, &m.ReservedAt, &m.BusinessDeadline, &buckets)
	if err != nil {
		return m, fmt.Errorf("read reservation %s: %w", rid, err)
	}
	// The bucket is a function of the user and the SKU's fixed bucket count,
	// so it is the one the gateway's message carried.
	m.Bucket = lua.BucketOf(m.UserID, buckets)
	m.ReservedAt, m.BusinessDeadline = m.ReservedAt.UTC(), m.BusinessDeadline.UTC()
	return m, nil
}
