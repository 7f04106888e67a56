package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/state"
)

// lostSagaBatch bounds the open orders one run looks at.
const lostSagaBatch = 500

// orders finds open orders (CREATED, PAYING, CANCEL_PENDING) past their
// payment deadline by more than the watermark: their saga should have
// cancelled them. One whose saga is not running (terminated, failed, lost in
// a bad deploy) is resumed with its fixed workflow ID: the new run reads the
// order from PostgreSQL and runs the same cancel protocol (the provider is
// asked first; a payment wins; otherwise cancel and release). Each lost run
// is one repair (its run id is part of the repair_id).
func (r *Reconciler) orders(ctx context.Context, rep *Report, activityID int64) error {
	rows, err := r.pool.Query(ctx, `
		SELECT o.reservation_id, o.order_id, o.status, o.version, o.expires_at
		FROM orders o
		WHERE o.status IN ('CREATED', 'PAYING', 'CANCEL_PENDING') AND o.expires_at < $1
		  AND ($2::bigint = 0 OR o.activity_id = $2)
		ORDER BY o.expires_at LIMIT $3`, rep.Watermark, activityID, lostSagaBatch)
	if err != nil {
		return fmt.Errorf("list overdue orders: %w", err)
	}
	type open struct {
		rid, oid uuid.UUID
		status   state.Order
		version  int64
		expires  time.Time
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (open, error) {
		var o open
		err := row.Scan(&o.rid, &o.oid, &o.status, &o.version, &o.expires)
		return o, err
	})
	if err != nil {
		return fmt.Errorf("list overdue orders: %w", err)
	}
	for _, o := range list {
		obj := "reservation:" + o.rid.String()
		ev := map[string]any{"order_id": o.oid, "order_status": o.status, "expires_at": o.expires}
		if r.sagas == nil {
			r.manual(ctx, rep, LostSaga, obj, o.version, "order "+o.status.String()+" past its payment deadline; no Temporal client to check its saga", ev)
			continue
		}
		running, runID, err := r.sagas.Running(ctx, o.rid)
		if err != nil {
			r.log.Warn("reconcile.saga_check_failed", "reservation_id", o.rid, "error", err)
			continue // Temporal unreachable: the next run looks again
		}
		if _, lost := CheckOpenOrder(o.status, o.expires, running, rep.Watermark); !lost {
			// Its saga is on it (perhaps retrying an activity: the activity
			// attempt alerts cover that); nothing to repair here.
			rep.Anomalies = append(rep.Anomalies, Anomaly{Type: LostSaga, Object: obj, Action: ActionLeft,
				Detail: "order " + o.status.String() + " past its payment deadline; its saga is running", Evidence: ev})
			continue
		}
		ev["last_run_id"] = runID
		r.autoKeyed(ctx, rep, LostSaga, obj, o.version, "CANCELLED", runID, ev, func() (string, error) {
			m, err := inventory.Message(ctx, r.pool, o.rid)
			if err != nil {
				return "", err
			}
			if err := r.sagas.Resume(ctx, m); err != nil {
				return "", err
			}
			return "saga resumed from PostgreSQL (last run " + nonEmpty(runID, "none") + ")", nil
		})
	}
	return nil
}
