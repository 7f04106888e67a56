// Package explain tells the whole story of one purchase: everything
// PostgreSQL, Redis and Temporal know about a reservation (found by its
// reservation, order or payment id), oldest first, and a verdict: consistent,
// or which invariant is off, with the repair that fits and the exact command
// to run. `seckill explain` and GET /v1/admin/explain/{id} print it.
package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
)

// ErrUnknownID means no reservation, order or payment has the id (in
// PostgreSQL, or among the Redis reservations of the active sales).
var ErrUnknownID = errors.New("no reservation, order or payment has this id")

// Kind is what the asked-for id turned out to be.
type Kind string

// Kinds of id.
const (
	KindReservation Kind = "reservation"
	KindOrder       Kind = "order"
	KindPayment     Kind = "payment"
)

// Event is one fact, at the time it happened.
type Event struct {
	At     time.Time      `json:"at"`
	Source string         `json:"source"` // the table, Redis key or Temporal
	What   string         `json:"what"`
	Detail map[string]any `json:"detail,omitempty"`
}

// Saga is what Temporal says of the reservation's saga.
type Saga struct {
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id,omitempty"`
	// Status is the execution status (RUNNING, COMPLETED, TERMINATED, ...),
	// NOT_FOUND when Temporal has no such workflow.
	Status string `json:"status"`
	// Step is the saga's current details (its status and last step).
	Step    string    `json:"step,omitempty"`
	Pending []Pending `json:"pending_activities,omitempty"`
}

// Running reports whether the saga runs.
func (s *Saga) Running() bool { return s != nil && s.Status == "RUNNING" }

// Pending is an activity the saga waits for.
type Pending struct {
	Activity    string `json:"activity"`
	Attempt     int32  `json:"attempt"`
	LastFailure string `json:"last_failure,omitempty"`
}

// Sagas describes a reservation's saga (workers/sagastarter.Control over Temporal).
type Sagas interface {
	Describe(ctx context.Context, reservationID uuid.UUID) (Saga, error)
}

// Report is everything known about one purchase.
type Report struct {
	ID            uuid.UUID  `json:"id"`
	Kind          Kind       `json:"kind"`
	ReservationID uuid.UUID  `json:"reservation_id"`
	OrderID       *uuid.UUID `json:"order_id,omitempty"`
	ActivityID    int64      `json:"activity_id"`
	SKUID         int64      `json:"sku_id"`
	// Bucket is the SKU's Redis stock bucket that holds the reservation
	// (docs/scale.md; 0 for a SKU of one bucket).
	Bucket int `json:"bucket"`
	// Status is each side's view in one line each.
	Status   Statuses `json:"status"`
	Redis    Redis    `json:"redis"`
	Timeline []Event  `json:"timeline"`
	Saga     *Saga    `json:"saga,omitempty"`
	// SagaError says why Temporal could not be asked (the rest is still true).
	SagaError string  `json:"saga_error,omitempty"`
	Verdict   Verdict `json:"verdict"`
}

// Statuses are the statuses that decide the verdict.
type Statuses struct {
	// Reservation is none (written ABSENT: MarshalJSON) when PostgreSQL has no row.
	Reservation  state.Reservation  `json:"reservation"`
	Reason       string             `json:"reason,omitempty"`
	Order        state.Order        `json:"order,omitzero"`
	OrderExpired bool               `json:"order_expired,omitempty"`
	Compensation state.Compensation `json:"compensation_task,omitzero"`
	// Payments counts payment_record rows by status.
	Payments map[state.Payment]int `json:"payments,omitempty"`
	// RefundTasks counts refund_task rows by status.
	RefundTasks map[state.Refund]int `json:"refund_tasks,omitempty"`
	Redis       string               `json:"redis"` // the Redis hash's status, ABSENT when gone
	// Resolved: an operator attested the case settled (mark-resolved applied).
	Resolved bool `json:"resolved_manually,omitempty"`
	// Changed and Deadline are the PostgreSQL reservation's updated_at and
	// business deadline (zero without a row): what reconciliation's rules read.
	Changed  time.Time `json:"reservation_changed_at,omitzero"`
	Deadline time.Time `json:"business_deadline,omitzero"`
}

// Absent is the status of a row or key that does not exist.
const Absent = "ABSENT"

// MarshalJSON writes s with its reservation ABSENT when PostgreSQL has none.
func (s Statuses) MarshalJSON() ([]byte, error) {
	type plain Statuses // without this method
	return json.Marshal(struct {
		Reservation string `json:"reservation"`
		plain
	}{reservationText(s.Reservation), plain(s)})
}

// reservationText is r's text, Absent for none.
func reservationText(r state.Reservation) string {
	if r.IsZero() {
		return Absent
	}
	return r.String()
}

// Explainer reads every store of one purchase.
type Explainer struct {
	pool  *pgxpool.Pool
	rdb   redis.Cmdable
	sagas Sagas
	now   func() time.Time
	// watermark is reconciliation's (SECKILL_RECONCILE_WATERMARK): the
	// verdict judges by reconciliation's rules what reconciliation would
	// judge now.
	watermark time.Duration
}

// SetWatermark makes the verdict judge as a reconciliation run with this
// watermark would (0, the default: as if everything were settled).
func (e *Explainer) SetWatermark(d time.Duration) { e.watermark = max(d, 0) }

// New returns an Explainer; sagas may be nil (Temporal is then not asked).
func New(pool *pgxpool.Pool, rdb redis.Cmdable, sagas Sagas) (*Explainer, error) {
	if pool == nil || rdb == nil {
		return nil, errors.New("explain: nil pool or redis")
	}
	return &Explainer{pool: pool, rdb: rdb, sagas: sagas, now: time.Now}, nil
}

// Explain tells the story of the purchase id belongs to (a reservation,
// order or payment id). An id nothing knows is ErrUnknownID.
func (e *Explainer) Explain(ctx context.Context, id uuid.UUID) (Report, error) {
	return e.ExplainIn(ctx, id, 0)
}

// ExplainIn is Explain with the id's sale known (activityID > 0): an id that
// only Redis holds is then looked for among that sale's SKUs alone.
func (e *Explainer) ExplainIn(ctx context.Context, id uuid.UUID, activityID int64) (Report, error) {
	rep := Report{ID: id, ActivityID: activityID, Timeline: []Event{}}
	if err := e.resolve(ctx, &rep); err != nil {
		return rep, err
	}
	if err := e.readPostgres(ctx, &rep); err != nil {
		return rep, err
	}
	if err := e.readRedis(ctx, &rep); err != nil {
		return rep, err
	}
	if e.sagas != nil {
		s, err := e.sagas.Describe(ctx, rep.ReservationID)
		if err != nil {
			rep.SagaError = err.Error()
		} else {
			rep.Saga = &s
		}
	}
	sortTimeline(rep.Timeline)
	rep.Verdict = judge(rep, e.now(), e.watermark)
	return rep, nil
}

// resolve finds the reservation the id belongs to and its sale.
func (e *Explainer) resolve(ctx context.Context, rep *Report) error {
	id := rep.ID
	var rid uuid.UUID
	var kind Kind
	err := e.pool.QueryRow(ctx, `
		SELECT rid, kind FROM (
			SELECT reservation_id AS rid, 'reservation' AS kind, 1 AS o FROM inventory_reservation WHERE reservation_id = $1
			UNION ALL SELECT reservation_id, 'order', 2 FROM orders WHERE order_id = $1
			UNION ALL SELECT o.reservation_id, 'payment', 3 FROM payment_record p JOIN orders o ON o.order_id = p.order_id WHERE p.payment_id = $1
		) x ORDER BY o LIMIT 1`, id).Scan(&rid, &kind)
	if err == nil {
		rep.Kind, rep.ReservationID = kind, rid
		var user int64
		var buckets int
		if err := e.pool.QueryRow(ctx, `SELECT r.activity_id, r.sku_id, r.user_id, COALESCE(i.buckets, 1)
			FROM inventory_reservation r LEFT JOIN sku_inventory i ON i.activity_id = r.activity_id AND i.sku_id = r.sku_id
			WHERE r.reservation_id = $1`, rid).Scan(&rep.ActivityID, &rep.SKUID, &user, &buckets); err != nil {
			return fmt.Errorf("explain %s: %w", id, err)
		}
		rep.Bucket = lua.BucketOf(user, buckets)
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("explain %s: %w", id, err)
	}
	// Not in PostgreSQL: a reservation only Redis holds (its message never arrived)?
	k, ok, err := e.findInRedis(ctx, id, rep.ActivityID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownID, id)
	}
	rep.Kind, rep.ReservationID, rep.ActivityID, rep.SKUID, rep.Bucket = KindReservation, id, k.ActivityID, k.SKUID, k.Bucket
	return nil
}
