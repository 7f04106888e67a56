package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

type resRow struct {
	id       uuid.UUID
	status   state.Reservation
	version  int64
	orderID  *uuid.UUID
	order    *state.Order
	deadline time.Time
	changed  time.Time
	k        lua.Keys // the reservation's bucket
}

// listReservations reads sku's PostgreSQL reservations older than the
// watermark, each with its bucket's keys.
func (r *Reconciler) listReservations(ctx context.Context, sku lua.SKU, rep *Report) ([]resRow, error) {
	rows, err := r.pool.Query(ctx, `
		SELECT r.reservation_id, r.status, r.version, r.order_id, o.status, r.business_deadline, r.updated_at, r.user_id
		FROM inventory_reservation r LEFT JOIN orders o ON o.order_id = r.order_id
		WHERE r.activity_id = $1 AND r.sku_id = $2 AND r.updated_at < $3
		  AND r.status IN ('RESERVED', 'ORDER_CREATED', 'ORDER_REJECTED', 'COMPENSATING', 'COMPENSATED', 'CANCELLED')`,
		sku.ActivityID, sku.SKUID, rep.Watermark)
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	var list []resRow
	for rows.Next() {
		var x resRow
		var userID int64
		if err := rows.Scan(&x.id, &x.status, &x.version, &x.orderID, &x.order, &x.deadline, &x.changed, &userID); err != nil {
			rows.Close()
			return nil, err
		}
		x.k = sku.For(userID)
		list = append(list, x)
	}
	rows.Close()
	return list, rows.Err()
}

// reservations walks PostgreSQL reservations older than the watermark.
func (r *Reconciler) reservations(ctx context.Context, sku lua.SKU, rep *Report) (int, error) {
	list, err := r.listReservations(ctx, sku, rep)
	if err != nil {
		return 0, err
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(list))
	for i, x := range list {
		cmds[i] = pipe.HMGet(ctx, x.k.Reservation(x.id.String()), "status")
	}
	if len(list) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("read redis reservations: %w", err)
		}
	}
	for i, x := range list {
		s, _ := cmds[i].Val()[0].(string)
		redisStatus, err := redisReservation(s)
		if err != nil {
			r.log.Error("reconcile.bad_redis_reservation", "reservation_id", x.id, "error", err)
			continue
		}
		fd, found := CheckStored(x.facts(redisStatus), rep.Watermark)
		if !found {
			continue
		}
		obj := "reservation:" + x.id.String()
		ev := map[string]any{"pg_status": x.status, "redis_status": redisStatus, "version": x.version}
		if fd.Manual {
			r.manual(ctx, rep, fd.Type, obj, x.version, fd.Detail, ev)
			continue
		}
		r.auto(ctx, rep, fd.Type, obj, x.version, fd.Target, ev, func() (string, error) { return r.repairStored(ctx, fd.Type, x, redisStatus) })
	}
	return len(list), nil
}

func (x resRow) facts(redisStatus state.Reservation) Facts {
	f := Facts{PG: x.status, HasOrder: x.orderID != nil, Changed: x.changed, Deadline: x.deadline, Redis: redisStatus}
	if x.order != nil {
		f.Order = *x.order
	}
	return f
}

// repairStored runs the standard transition that repairs one finding of
// CheckStored.
func (r *Reconciler) repairStored(ctx context.Context, typ string, x resRow, redisStatus state.Reservation) (string, error) {
	comp := steps.CompensateInput{ReservationID: x.id, ActivityID: x.k.ActivityID, SKUID: x.k.SKUID, Bucket: x.k.Bucket}
	switch typ {
	case ProjectionBehind:
		return r.rebuildProjection(ctx, x.k, x, redisStatus)
	case CompensationStall:
		c, err := r.stores.Inventory.Compensate(ctx, comp, leaseOwner())
		return c.Status.String() + " " + c.Reason, err
	case ReleaseMissing:
		p, err := r.stores.Inventory.ReleaseRedis(ctx, steps.ReleaseInput{ReservationID: x.id, OrderID: *x.orderID, ActivityID: x.k.ActivityID, SKUID: x.k.SKUID, Bucket: x.k.Bucket})
		return fmt.Sprintf("release.lua %d %s", p.Code, p.Text), counterMissing(p, err)
	case DeadlinePassed:
		st, err := r.stores.Inventory.RejectOverdue(ctx, inventory.RejectInput{ReservationID: x.id, Grace: r.watermark})
		if err != nil || st != state.ReservationOrderRejected {
			return st.String(), err
		}
		c, err := r.stores.Inventory.Compensate(ctx, comp, leaseOwner())
		return "ORDER_REJECTED then " + c.Status.String() + " " + c.Reason, err
	}
	return "", fmt.Errorf("no repair for %s", typ)
}

// rebuildProjection: a RESERVED Redis hash takes the standard projection
// (open_reserved → committed once); a missing hash is recreated without
// touching counters (stock is never changed by a projection repair).
func (r *Reconciler) rebuildProjection(ctx context.Context, k lua.Keys, x resRow, redisStatus state.Reservation) (string, error) {
	if x.orderID == nil {
		return "", errors.New("ORDER_CREATED without order_id")
	}
	if redisStatus == state.ReservationReserved {
		p, err := r.stores.Inventory.ProjectOrderCreated(ctx, steps.ProjectionInput{ReservationID: x.id, OrderID: *x.orderID, ActivityID: k.ActivityID, SKUID: k.SKUID, Bucket: k.Bucket})
		return fmt.Sprintf("order_created.lua %d %s", p.Code, p.Text), counterMissing(p, err)
	}
	key := k.Reservation(x.id.String())
	if err := r.rdb.HSet(ctx, key, "status", state.ReservationOrderCreated.String(), "reservation_id", x.id.String(), "order_id", x.orderID.String(),
		"rebuilt_by", "reconcile").Err(); err != nil {
		return "", err
	}
	return "hash recreated (counters untouched)", nil
}

// counterMissing turns a script's COUNTER_MISSING answer (nothing changed:
// the SKU's counter is gone until a rebuild) into an error, so the repair is
// recorded FAILED and tried again by the next run instead of APPLIED.
func counterMissing(p steps.ProjectionResult, err error) error {
	if err == nil && p.Code < 0 && p.Text == "COUNTER_MISSING" {
		return errors.New("the SKU's Redis counter is missing: rebuild it (seckill redis rebuild), the next run repairs this")
	}
	return err
}

// redisReservation is the status field of a reservation's Redis hash: ""
// (no hash, or no field) is none; any other text must be a status.
func redisReservation(s string) (state.Reservation, error) {
	if s == "" {
		return state.Reservation{}, nil
	}
	return state.ParseReservation(s)
}
