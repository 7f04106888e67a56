package reservation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/state"
)

// ErrNotFound means no reservation with that id belongs to the caller. A
// reservation of another user answers the same, so ids cannot be probed.
var ErrNotFound = errors.New("reservation not found")

// View is what a client sees of its reservation.
type View struct {
	ReservationID uuid.UUID `json:"reservation_id"`
	// Status is the client-facing state: QUEUED, ORDER_CREATED, REJECTED,
	// CANCELLED, UNDER_REVIEW, or the order's state once it moves (PAID, ...).
	Status string `json:"status"`
	// ReservationStatus is the internal state machine value (docs/spec.md#reservation-states).
	ReservationStatus string     `json:"reservation_status"`
	OrderID           *uuid.UUID `json:"order_id,omitempty"`
	OrderStatus       string     `json:"order_status,omitempty"`
	ReasonCode        string     `json:"reason_code,omitempty"`
	BusinessDeadline  time.Time  `json:"business_deadline"`
	// Source says where the answer came from: "redis" (projection) or "postgres".
	Source string `json:"source"`
}

// ClientStatus maps a reservation state to the client-facing one.
func ClientStatus(reservationStatus state.Reservation) string {
	switch reservationStatus {
	case state.ReservationReserved:
		return "QUEUED"
	case state.ReservationOrderRejected, state.ReservationCompensating, state.ReservationCompensated:
		return "REJECTED"
	case state.ReservationManualReview:
		return "UNDER_REVIEW"
	default:
		return reservationStatus.String()
	}
}

// clientStatusOf is ClientStatus of a status read as text (a Redis hash
// field): a text that is no reservation status is answered as it is.
func clientStatusOf(text string) string {
	st, err := state.ParseReservation(text)
	if err != nil {
		return text
	}
	return ClientStatus(st)
}

// StatusReader reads a reservation from the Redis projection, falling back
// to PostgreSQL (the authority) when Redis has no record.
type StatusReader struct {
	rdb     redis.Cmdable
	pool    *pgxpool.Pool
	buckets *Buckets
}

// NewStatusReader returns a StatusReader; pool may be nil (Redis only).
func NewStatusReader(rdb redis.Cmdable, pool *pgxpool.Pool) *StatusReader {
	return &StatusReader{rdb: rdb, pool: pool, buckets: NewBuckets(rdb)}
}

// Get returns userID's reservation rid of (activity, sku).
//
// With PostgreSQL to fall back on, Redis gets half of what is left of ctx's
// deadline: a Redis that stopped answering leaves the other half to the
// authority, so the read still answers within its budget.
func (s *StatusReader) Get(ctx context.Context, userID, activityID, skuID int64, rid uuid.UUID) (View, error) {
	rctx := ctx
	if dl, ok := ctx.Deadline(); ok && s.pool != nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	h, err := s.fromRedis(rctx, userID, activityID, skuID, rid)
	if err != nil && s.pool == nil {
		return View{}, err
	}
	if err == nil && h[0] != nil {
		return redisView(h, userID, rid)
	}
	if s.pool == nil {
		return View{}, ErrNotFound
	}
	v, perr := s.fromPostgres(ctx, userID, activityID, skuID, rid)
	if errors.Is(perr, ErrNotFound) && err != nil {
		// PostgreSQL does not know it yet and Redis did not answer: the
		// reservation may well exist, so the answer is unknown, not 404.
		return View{}, err
	}
	return v, perr
}

// redisView is the View of reservation rid from its projection's fields
// (fromRedis: user_id, which is set, status, business_deadline_ms,
// order_id): ErrNotFound when it belongs to a user other than userID.
func redisView(h []any, userID int64, rid uuid.UUID) (View, error) {
	if h[0].(string) != strconv.FormatInt(userID, 10) {
		return View{}, ErrNotFound
	}
	st, _ := h[1].(string)
	v := View{ReservationID: rid, ReservationStatus: st, Status: clientStatusOf(st), Source: "redis"}
	if ms, err := strconv.ParseInt(fmt.Sprint(h[2]), 10, 64); err == nil {
		v.BusinessDeadline = time.UnixMilli(ms).UTC()
	}
	if oid, err := uuid.Parse(fmt.Sprint(h[3])); err == nil {
		v.OrderID = &oid
	}
	return v, nil
}

// fromRedis reads the reservation's projection: user, status, deadline and order.
func (s *StatusReader) fromRedis(ctx context.Context, userID, activityID, skuID int64, rid uuid.UUID) ([]any, error) {
	k, err := s.buckets.Keys(ctx, userID, activityID, skuID)
	if err != nil {
		return nil, err
	}
	h, err := s.rdb.HMGet(ctx, k.Reservation(rid.String()), "user_id", "status", "business_deadline_ms", "order_id").Result()
	if err != nil {
		return nil, fmt.Errorf("read reservation from redis: %w", err)
	}
	return h, nil
}

func (s *StatusReader) fromPostgres(ctx context.Context, userID, activityID, skuID int64, rid uuid.UUID) (View, error) {
	v := View{ReservationID: rid, Source: "postgres"}
	var reason, orderStatus *string
	err := s.pool.QueryRow(ctx, `
		SELECT r.status, r.reason_code, r.business_deadline, o.order_id, o.status
		FROM inventory_reservation r
		LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		WHERE r.reservation_id = $1 AND r.user_id = $2 AND r.activity_id = $3 AND r.sku_id = $4`,
		rid, userID, activityID, skuID).Scan(&v.ReservationStatus, &reason, &v.BusinessDeadline, &v.OrderID, &orderStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, fmt.Errorf("read reservation from postgres: %w", err)
	}
	v.Status = clientStatusWithOrder(v.ReservationStatus, orderStatus)
	if reason != nil {
		v.ReasonCode = *reason
	}
	if orderStatus != nil {
		v.OrderStatus = *orderStatus
	}
	return v, nil
}

// clientStatusWithOrder is the client-facing status of a reservation with
// its order's status (nil without an order): once its order moved on from
// CREATED (PAID, CANCELLED, ...), the order's status; ClientStatus otherwise.
func clientStatusWithOrder(reservationStatus string, orderStatus *string) string {
	if orderStatus != nil && reservationStatus == state.ReservationOrderCreated.String() && *orderStatus != state.OrderCreated.String() {
		return *orderStatus
	}
	return clientStatusOf(reservationStatus)
}
