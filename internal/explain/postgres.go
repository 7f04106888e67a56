package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/state"
)

// timelineSQL lists every PostgreSQL row of one reservation ($1) and its
// order ($2, may be NULL) as events: when the row was written, its state
// now, and the row itself (without hashes and message bodies). A row
// changed after it was written gets a second event at its last change.
const timelineSQL = `
WITH pay AS (SELECT payment_id, provider_transaction_id FROM payment_record WHERE order_id = $2),
txn AS (SELECT provider_transaction_id FROM pay UNION SELECT provider_transaction_id FROM payment_intent
        WHERE order_id = $2 AND provider_transaction_id IS NOT NULL),
ev AS (
  SELECT reserved_at AS at, updated_at AS changed, 'inventory_reservation' AS source,
         'reservation ' || status || coalesce(' (' || reason_code || ')', '') AS what, to_jsonb(x) AS detail
  FROM inventory_reservation x WHERE reservation_id = $1
  UNION ALL SELECT created_at, processed_at, 'consumer_inbox', consumer_group || ': ' || result_code,
         to_jsonb(x) - 'payload_hash' FROM consumer_inbox x WHERE reservation_id = $1
  UNION ALL SELECT created_at, created_at, 'message_quarantine', 'quarantined: ' || reason,
         to_jsonb(x) - 'body' - 'payload_hash' FROM message_quarantine x
         WHERE message_id = (SELECT message_id::text FROM inventory_reservation WHERE reservation_id = $1)
  UNION ALL SELECT created_at, updated_at, 'orders', 'order ' || status, to_jsonb(x) FROM orders x WHERE order_id = $2
  UNION ALL SELECT created_at, updated_at, 'payment_intent', 'payment intent ' || status, to_jsonb(x)
         FROM payment_intent x WHERE order_id = $2
  UNION ALL SELECT created_at, updated_at, 'payment_record', 'payment ' || status, to_jsonb(x)
         FROM payment_record x WHERE order_id = $2
  UNION ALL SELECT received_at, received_at, 'payment_callback', 'callback ' || result, to_jsonb(x) - 'body_hash'
         FROM payment_callback x WHERE provider_transaction_id IN (SELECT provider_transaction_id FROM txn)
  UNION ALL SELECT created_at, updated_at, 'refund_task', 'refund task ' || status, to_jsonb(x)
         FROM refund_task x WHERE order_id = $2
  UNION ALL SELECT created_at, updated_at, 'compensation_task', 'compensation task ' || status
         || coalesce(' (' || last_result || ')', ''), to_jsonb(x) FROM compensation_task x WHERE reservation_id = $1
  UNION ALL SELECT created_at, created_at, 'inventory_ledger', 'stock ' || change_type, to_jsonb(x)
         FROM inventory_ledger x WHERE reservation_id = $1
  UNION ALL SELECT created_at, coalesce(sent_at, created_at), 'event_outbox', event_type || ' ' || status, to_jsonb(x)
         FROM event_outbox x WHERE aggregate_id = $1 OR aggregate_id = $2 OR aggregate_id IN (SELECT payment_id FROM pay)
  UNION ALL SELECT created_at, updated_at, 'repair_task', rule_name || ' ' || status, to_jsonb(x)
         FROM repair_task x WHERE object_id = $1::text OR object_id = $2::text
)
SELECT at, changed, source, what, detail FROM ev`

// readPostgres fills the statuses and the PostgreSQL part of the timeline.
func (e *Explainer) readPostgres(ctx context.Context, rep *Report) error {
	st := &rep.Status
	var reason *string
	var orderID *uuid.UUID
	var orderStatus *state.Order
	var expired *bool
	var task *state.Compensation
	err := e.pool.QueryRow(ctx, `
		SELECT r.status, r.reason_code, o.order_id, o.status, o.expires_at < clock_timestamp(), t.status,
			r.updated_at, r.business_deadline
		FROM inventory_reservation r LEFT JOIN orders o ON o.reservation_id = r.reservation_id
		LEFT JOIN compensation_task t ON t.reservation_id = r.reservation_id
		WHERE r.reservation_id = $1`, rep.ReservationID).Scan(&st.Reservation, &reason, &orderID, &orderStatus, &expired, &task,
		&st.Changed, &st.Deadline)
	if err != nil && err != pgx.ErrNoRows {
		return fmt.Errorf("explain %s: read reservation: %w", rep.ReservationID, err)
	}
	if reason != nil {
		st.Reason = *reason
	}
	if orderID != nil {
		rep.OrderID, st.Order, st.OrderExpired = orderID, *orderStatus, *expired
	}
	if task != nil {
		st.Compensation = *task
	}
	if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM repair_task WHERE object_id = $1::text
		AND rule_name = 'MANUAL:mark-resolved' AND status = 'APPLIED')`, rep.ReservationID).Scan(&st.Resolved); err != nil {
		return fmt.Errorf("explain %s: read repairs: %w", rep.ReservationID, err)
	}
	if err := e.countMoney(ctx, rep); err != nil {
		return err
	}
	return e.timeline(ctx, rep)
}

// countMoney counts the order's payments and refund tasks by status.
func (e *Explainer) countMoney(ctx context.Context, rep *Report) error {
	if rep.OrderID == nil {
		return nil
	}
	rows, err := e.pool.Query(ctx, `
		SELECT 'payment', status, count(*) FROM payment_record WHERE order_id = $1 GROUP BY status
		UNION ALL SELECT 'refund', status, count(*) FROM refund_task WHERE order_id = $1 GROUP BY status`, *rep.OrderID)
	if err != nil {
		return fmt.Errorf("explain %s: count payments: %w", rep.ReservationID, err)
	}
	defer rows.Close()
	rep.Status.Payments, rep.Status.RefundTasks = map[state.Payment]int{}, map[state.Refund]int{}
	for rows.Next() {
		var what, status string
		var n int
		if err := rows.Scan(&what, &status, &n); err != nil {
			return fmt.Errorf("explain %s: count payments: %w", rep.ReservationID, err)
		}
		if what == "payment" {
			p, err := state.ParsePayment(status)
			if err != nil {
				return fmt.Errorf("explain %s: %w", rep.ReservationID, err)
			}
			rep.Status.Payments[p] = n
		} else {
			r, err := state.ParseRefund(status)
			if err != nil {
				return fmt.Errorf("explain %s: %w", rep.ReservationID, err)
			}
			rep.Status.RefundTasks[r] = n
		}
	}
	return rows.Err()
}

// timeline adds the PostgreSQL rows of the purchase as events.
func (e *Explainer) timeline(ctx context.Context, rep *Report) error {
	rows, err := e.pool.Query(ctx, timelineSQL, rep.ReservationID, rep.OrderID)
	if err != nil {
		return fmt.Errorf("explain %s: read its rows: %w", rep.ReservationID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var at, changed time.Time
		var source, what string
		var raw []byte
		if err := rows.Scan(&at, &changed, &source, &what, &raw); err != nil {
			return fmt.Errorf("explain %s: read its rows: %w", rep.ReservationID, err)
		}
		var detail map[string]any
		_ = json.Unmarshal(raw, &detail) // to_jsonb of a row: always an object
		if changed.Sub(at) > time.Millisecond {
			rep.Timeline = append(rep.Timeline, Event{At: at, Source: source, What: "row created"},
				Event{At: changed, Source: source, What: what, Detail: detail})
			continue
		}
		rep.Timeline = append(rep.Timeline, Event{At: at, Source: source, What: what, Detail: detail})
	}
	return rows.Err()
}

// sortTimeline orders events oldest first (stable: a row's events keep their order).
func sortTimeline(ev []Event) {
	slices.SortStableFunc(ev, func(a, b Event) int { return a.At.Compare(b.At) })
}
