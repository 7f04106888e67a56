package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// unsettledPage is how many send_due members one ZSCAN step reads.
const unsettledPage = 500

// unsettled is the Redis-side loop of reconciliation
// (docs/spec.md#reconciliation). send_due holds every
// reservation Redis admitted that is still RESERVED there (lua/send_done.lua
// never drops one). A reservation past its business deadline (older than the
// watermark) that PostgreSQL never saw, or holds as RESERVED, gets its
// durable rejection first (recorded from the Redis hash, so a message
// arriving later is rejected by the state machine), then the standard
// compensation gives its unit back. Reservations PostgreSQL decided are the
// PostgreSQL-side loop's. It returns how many it looked at.
func (r *Reconciler) unsettled(ctx context.Context, k lua.Keys, rep *Report) (int, error) {
	seen := 0
	var cursor uint64
	for {
		page, next, err := r.rdb.ZScan(ctx, k.SendDue(), cursor, "", unsettledPage).Result()
		if err != nil {
			return seen, fmt.Errorf("scan %s: %w", k.SendDue(), err)
		}
		var rids []string
		for i := 0; i+1 < len(page); i += 2 { // member, score pairs
			rids = append(rids, page[i])
		}
		n, err := r.unsettledPage(ctx, k, rep, rids)
		seen += n
		if err != nil {
			return seen, err
		}
		if cursor = next; cursor == 0 {
			return seen, nil
		}
	}
}

func (r *Reconciler) unsettledPage(ctx context.Context, k lua.Keys, rep *Report, rids []string) (int, error) {
	if len(rids) == 0 {
		return 0, nil
	}
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(rids))
	for i, rid := range rids {
		cmds[i] = pipe.HGetAll(ctx, k.Reservation(rid))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read redis reservations: %w", err)
	}
	// Past the deadline and still RESERVED in Redis.
	overdue := map[uuid.UUID]reservation.Fields{}
	cutoff := rep.Watermark.UnixMilli()
	for _, c := range cmds {
		h := c.Val()
		if len(h) == 0 || h["status"] != state.ReservationReserved.String() {
			continue // settled, or gone (the scanner counts it missing)
		}
		deadline, err := strconv.ParseInt(h["business_deadline_ms"], 10, 64)
		if err != nil || deadline >= cutoff {
			continue
		}
		f, err := reservation.ParseFields(h)
		if err != nil {
			r.log.Error("reconcile.bad_redis_reservation", "reservation_id", h["reservation_id"], "error", err)
			continue
		}
		overdue[f.ReservationID] = f
	}
	if len(overdue) == 0 {
		return len(rids), nil
	}
	ids := make([]uuid.UUID, 0, len(overdue))
	for id := range overdue {
		ids = append(ids, id)
	}
	known, err := r.pgStatuses(ctx, ids)
	if err != nil {
		return len(rids), err
	}
	for _, id := range ids {
		pgStatus := known[id]
		f := overdue[id]
		fd, found := CheckUnsent(Facts{PG: pgStatus, Redis: state.ReservationReserved, RedisDeadline: time.UnixMilli(f.DeadlineMS)}, rep.Watermark)
		if !found {
			continue // PostgreSQL decided; the PostgreSQL-side loop repairs Redis
		}
		m := f.Message()
		ev := map[string]any{"pg_status": nonEmpty(pgStatus.String(), "ABSENT"), "redis_status": f.Status, "mq_state": f.MQState,
			"send_attempts": f.SendAttempts, "business_deadline": time.UnixMilli(f.DeadlineMS).UTC()}
		r.auto(ctx, rep, fd.Type, "reservation:"+id.String(), 0, fd.Target, ev, func() (string, error) {
			st, err := r.stores.Inventory.RejectOverdue(ctx, inventory.RejectInput{ReservationID: id, Grace: r.watermark, Unseen: &m})
			switch {
			case err != nil:
				return "", err
			case st == state.ReservationReserved:
				return "", errors.New("not past its deadline by the database clock yet: retried next run")
			case st != state.ReservationOrderRejected:
				return "reservation is " + st.String() + ": decided meanwhile, left to its saga", nil
			}
			c, err := r.stores.Inventory.Compensate(ctx, steps.CompensateInput{ReservationID: id, ActivityID: k.ActivityID, SKUID: k.SKUID, Bucket: k.Bucket}, leaseOwner())
			return "ORDER_REJECTED then " + c.Status.String() + " " + c.Reason, err
		})
	}
	return len(rids), nil
}

// pgStatuses reads the PostgreSQL status of each reservation that has a row.
func (r *Reconciler) pgStatuses(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]state.Reservation, error) {
	rows, err := r.pool.Query(ctx, `SELECT reservation_id, status FROM inventory_reservation WHERE reservation_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	known := map[uuid.UUID]state.Reservation{}
	for rows.Next() {
		var id uuid.UUID
		var st state.Reservation
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read reservations: %w", err)
		}
		known[id] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reservations: %w", err)
	}
	return known, nil
}
