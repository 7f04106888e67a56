// Package rebuild restores a sale's Redis admission state from PostgreSQL
// after Redis lost data (FLUSHALL, a failover that dropped writes): counters,
// sale window, reservation hashes, request maps, user guards and the
// compensation/release markers, so the sale can go on without overselling.
//
// Reservations that only ever existed in Redis (admitted, message still in
// flight) are unknown to PostgreSQL and cannot be rebuilt: their orders are
// still created (PostgreSQL's conditional stock update is the guard), but
// Redis will not have counted them. That is why rebuilding while the sale is
// admitting needs force, and why a second rebuild after the backlog drained
// (or reconciliation's CROSS_SYSTEM_DELTA) closes the gap.
package rebuild

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

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
)

// ErrSaleAdmitting refuses a rebuild during the sale window without force.
var ErrSaleAdmitting = errors.New("the sale is admitting buyers: rebuild now only with --force (see docs/operations.md)")

// SKU is what a rebuild wrote for one SKU.
type SKU struct {
	SKUID        int64 `json:"sku_id"`
	Initial      int64 `json:"initial"`
	Available    int64 `json:"available"`
	OpenReserved int64 `json:"open_reserved"`
	Committed    int64 `json:"committed"`
	Reservations int   `json:"reservations"`
	Buckets      int   `json:"buckets"`
}

// Rebuild rewrites activityID's Redis state from PostgreSQL.
func Rebuild(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, activityID int64, ttl time.Duration, force bool) ([]SKU, error) {
	var starts, ends time.Time
	var payTimeout, deadline, maxPerUser int64
	err := pool.QueryRow(ctx, `SELECT starts_at, ends_at, payment_timeout_seconds, order_deadline_seconds, max_per_user
		FROM sale_activity WHERE activity_id = $1`,
		activityID).Scan(&starts, &ends, &payTimeout, &deadline, &maxPerUser)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("no activity %d in PostgreSQL", activityID)
	}
	if err != nil {
		return nil, err
	}
	if now := time.Now(); !force && !now.Before(starts) && now.Before(ends) {
		return nil, ErrSaleAdmitting
	}
	rows, err := pool.Query(ctx, `SELECT sku_id, initial_stock, available_stock, occupied_stock, sold_stock, buckets
		FROM sku_inventory WHERE activity_id = $1 ORDER BY sku_id`, activityID)
	if err != nil {
		return nil, err
	}
	var invs []inv
	for rows.Next() {
		var v inv
		if err := rows.Scan(&v.sku, &v.initial, &v.avail, &v.occ, &v.sold, &v.buckets); err != nil {
			rows.Close()
			return nil, err
		}
		invs = append(invs, v)
	}
	rows.Close()
	w := window{starts: starts, ends: ends, payTimeout: payTimeout, deadline: deadline, maxPerUser: maxPerUser}
	var out []SKU
	for _, v := range invs {
		s, err := rebuildSKU(ctx, pool, rdb, lua.SKU{ActivityID: activityID, SKUID: v.sku, Buckets: v.buckets}, v, w, ttl)
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	return out, nil
}

type inv struct {
	sku, initial, avail, occ, sold int64
	buckets                        int
}

type window struct {
	starts, ends                     time.Time
	payTimeout, deadline, maxPerUser int64
}

// rebuildSKU rewrites every bucket of one SKU. Each reservation goes to its
// user's bucket; PostgreSQL's available units (less those Redis still holds
// for reservations PostgreSQL has not decided) are spread evenly over the
// buckets. Transfers in flight are dropped with the counters: their units
// are in PostgreSQL's available stock, so they are in the rebuilt counters.
func rebuildSKU(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, sku lua.SKU, v inv, w window, ttl time.Duration) (SKU, error) {
	n, per, err := reservations(ctx, pool, rdb, sku, ttl)
	if err != nil {
		return SKU{}, err
	}
	s := SKU{SKUID: v.sku, Committed: v.occ + v.sold, Reservations: n, Buckets: sku.Buckets}
	var counted int64
	for _, c := range per {
		s.OpenReserved += c.open
		counted += c.committed
	}
	s.Available = v.avail - s.OpenReserved
	s.Initial = s.Available + s.OpenReserved + s.Committed
	// PostgreSQL's stock rows are the authority: what the reservations do not
	// explain (and a negative available) stays in bucket 0, where the
	// invariant check shows it.
	per[0].committed += s.Committed - counted
	avail := lua.Split(max(s.Available, 0), sku.Buckets)
	avail[0] += min(s.Available, 0)
	for b, k := range sku.All() {
		c := per[b]
		initial := avail[b] + c.open + c.committed
		pipe := rdb.TxPipeline() // one slot: the bucket's
		pipe.Del(ctx, k.Counter(), k.TransfersOut(), k.TransfersClosed())
		pipe.HSet(ctx, k.Counter(), "initial", initial, "available", avail[b], "open_reserved", c.open,
			"committed", c.committed, "compensated_total", c.compensated, "released_total", c.released,
			"rebuilt_at_ms", time.Now().UnixMilli(),
			// A version no gateway's copy of the holders hash can carry: each
			// reloads it (internal/reservation/soldout.go).
			"holders_version", time.Now().UnixMicro())
		pipe.HSet(ctx, k.Meta(), "start_ms", w.starts.UnixMilli(), "end_ms", w.ends.UnixMilli(),
			"order_deadline_ms", w.deadline*1000, "payment_timeout_ms", w.payTimeout*1000, "buckets", sku.Buckets,
			lua.MetaMaxPerUser, w.maxPerUser)
		if _, err := pipe.Exec(ctx); err != nil {
			return s, fmt.Errorf("write counters of sku %d bucket %d: %w", v.sku, b, err)
		}
		if err := rdb.SAdd(ctx, lua.ActiveSKUs, k.Member()).Err(); err != nil {
			return s, fmt.Errorf("register sku %d bucket %d: %w", v.sku, b, err)
		}
	}
	return s, nil
}

// counts are one bucket's units by what holds them.
type counts struct{ open, committed, compensated, released int64 }

// reservations rewrites every reservation hash, request map, user guard (and
// its holders entry) and marker of one SKU from PostgreSQL, each in its
// user's bucket, and counts each bucket's units.
func reservations(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, sku lua.SKU, ttl time.Duration) (int, []counts, error) {
	per := make([]counts, max(sku.Buckets, 1))
	rows, err := pool.Query(ctx, `
		SELECT r.reservation_id, r.request_id, r.user_id, r.message_id, r.status, r.order_id, r.reserved_at, r.business_deadline,
		       (SELECT count(*) FROM inventory_ledger l WHERE l.reservation_id = r.reservation_id AND l.change_type = 'RELEASE') > 0
		FROM inventory_reservation r WHERE r.activity_id = $1 AND r.sku_id = $2`, sku.ActivityID, sku.SKUID)
	if err != nil {
		return 0, per, err
	}
	defer rows.Close()
	pipe := rdb.Pipeline()
	for _, k := range sku.All() {
		pipe.Del(ctx, k.Holders()) // rewritten from PostgreSQL's reservations below
	}
	n := 0
	for rows.Next() {
		var rid, req, msg uuid.UUID
		var user int64
		var status state.Reservation
		var order *uuid.UUID
		var reservedAt, deadline time.Time
		var released bool
		if err := rows.Scan(&rid, &req, &user, &msg, &status, &order, &reservedAt, &deadline, &released); err != nil {
			return n, per, err
		}
		k := sku.For(user)
		c := &per[k.Bucket]
		key := k.Reservation(rid.String())
		fields := []any{"status", status.String(), "mq_state", "PUBLISHED", "activity_id", k.ActivityID, "sku_id", k.SKUID,
			"user_id", user, "request_id", req.String(), "reservation_id", rid.String(), "message_id", msg.String(),
			"schema_version", 1, "reserved_at_ms", reservedAt.UnixMilli(), "business_deadline_ms", deadline.UnixMilli(),
			"send_attempts", 0, "last_error", "", "rebuilt", 1, "bucket", k.Bucket}
		if order != nil {
			fields = append(fields, "order_id", order.String())
		}
		pipe.Del(ctx, key)
		pipe.HSet(ctx, key, fields...)
		pipe.PExpire(ctx, key, ttl)
		pipe.Set(ctx, k.Request(user, req.String()), rid.String(), ttl)
		pipe.Set(ctx, k.User(user), rid.String(), ttl)
		pipe.HSet(ctx, k.Holders(), strconv.FormatInt(user, 10), rid.String()+" "+req.String())
		switch status {
		case state.ReservationReserved, state.ReservationOrderRejected, state.ReservationCompensating:
			c.open++
		case state.ReservationOrderCreated:
			if order != nil && !released {
				c.committed++
			}
		case state.ReservationCompensated:
			c.compensated++
			pipe.Set(ctx, k.CompensationMarker(rid.String()), inventory.CompensationKey(rid), ttl)
		}
		if released && order != nil {
			c.released++
			pipe.Set(ctx, k.ReleaseMarker(rid.String()), "RELEASE:"+order.String(), ttl)
		}
		n++
		if n%500 == 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return n, per, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, per, err
	}
	for _, k := range sku.All() {
		pipe.PExpire(ctx, k.Holders(), ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil && n > 0 {
		return n, per, err
	}
	return n, per, nil
}
