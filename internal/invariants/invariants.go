// Package invariants checks the invariants of ARCHITECTURE.md on the real
// stores of one (activity, sku): the demo, the end-to-end tests and
// operators run the same checks.
package invariants

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Snapshot is the stock picture of one SKU in both stores.
type Snapshot struct {
	PGInitial, PGAvailable, PGOccupied, PGSold              int64
	RedisInitial, RedisAvailable, RedisOpen, RedisCommitted int64
	ValidOrders                                             int64
	// RedisCompensated counts units compensate.lua gave back; PGCompensated
	// the reservations PostgreSQL authorized for it (COMPENSATING/COMPENSATED).
	RedisCompensated, PGCompensated int64
	RedisPresent                    bool
}

// Take reads the snapshot.
func Take(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, activityID, skuID int64) (Snapshot, error) {
	var s Snapshot
	if err := pool.QueryRow(ctx, `
		SELECT i.initial_stock, i.available_stock, i.occupied_stock, i.sold_stock,
		       (SELECT count(*) FROM orders o WHERE o.activity_id = i.activity_id AND o.sku_id = i.sku_id
		          AND o.status NOT IN ('CANCELLED', 'REFUNDED'))
		FROM sku_inventory i WHERE i.activity_id = $1 AND i.sku_id = $2`, activityID, skuID).
		Scan(&s.PGInitial, &s.PGAvailable, &s.PGOccupied, &s.PGSold, &s.ValidOrders); err != nil {
		return s, fmt.Errorf("read sku_inventory %d/%d: %w", activityID, skuID, err)
	}
	k := lua.Keys{ActivityID: activityID, SKUID: skuID}
	v, err := rdb.HMGet(ctx, k.Counter(), "initial", "available", "open_reserved", "committed", "compensated_total").Result()
	if err != nil {
		return s, fmt.Errorf("read redis counters: %w", err)
	}
	s.RedisPresent = v[0] != nil
	n := func(x any) int64 {
		i, _ := strconv.ParseInt(fmt.Sprint(x), 10, 64)
		return i
	}
	s.RedisInitial, s.RedisAvailable, s.RedisOpen, s.RedisCommitted = n(v[0]), n(v[1]), n(v[2]), n(v[3])
	s.RedisCompensated = n(v[4])
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2
		AND status IN ('COMPENSATING', 'COMPENSATED')`, activityID, skuID).Scan(&s.PGCompensated); err != nil {
		return s, fmt.Errorf("count compensations: %w", err)
	}
	return s, nil
}

// Violation is one broken invariant, named as in ARCHITECTURE.md.
type Violation struct {
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Check returns every invariant that does not hold. quiescent means no
// message, saga or projection is in flight, so the cross-system relation of
// I7 must hold exactly.
func Check(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, activityID, skuID int64, quiescent bool) (Snapshot, []Violation, error) {
	s, err := Take(ctx, pool, rdb, activityID, skuID)
	if err != nil {
		return s, nil, err
	}
	var out []Violation
	add := func(inv, format string, a ...any) { out = append(out, Violation{inv, fmt.Sprintf(format, a...)}) }
	if s.ValidOrders > s.PGInitial {
		add("I1", "%d valid orders > initial stock %d", s.ValidOrders, s.PGInitial)
	}
	if s.PGAvailable < 0 || s.PGOccupied < 0 || s.PGSold < 0 {
		add("I1", "negative PostgreSQL stock %d/%d/%d", s.PGAvailable, s.PGOccupied, s.PGSold)
	}
	var dupUsers, dupReservations, dupMessages, dupComp int64
	if err := pool.QueryRow(ctx, `
		SELECT
		  (SELECT count(*) FROM (SELECT user_id FROM orders WHERE activity_id = $1 AND sku_id = $2
		      AND status NOT IN ('CANCELLED', 'REFUNDED') GROUP BY user_id HAVING count(*) > 1) d),
		  (SELECT count(*) FROM (SELECT reservation_id FROM orders WHERE activity_id = $1 AND sku_id = $2
		      GROUP BY reservation_id HAVING count(*) > 1) d),
		  (SELECT count(*) FROM (SELECT r.message_id FROM inventory_reservation r WHERE r.activity_id = $1 AND r.sku_id = $2
		      GROUP BY r.message_id HAVING count(*) > 1) d),
		  (SELECT count(*) FROM (SELECT reservation_id FROM compensation_task t
		      WHERE t.reservation_id IN (SELECT reservation_id FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2)
		      GROUP BY reservation_id HAVING count(*) > 1) d)`, activityID, skuID).
		Scan(&dupUsers, &dupReservations, &dupMessages, &dupComp); err != nil {
		return s, nil, fmt.Errorf("invariant queries: %w", err)
	}
	if dupUsers > 0 || dupReservations > 0 {
		add("I2", "%d users / %d reservations hold more than one valid order", dupUsers, dupReservations)
	}
	if dupMessages > 0 {
		add("I3", "%d message_ids applied to more than one reservation", dupMessages)
	}
	if dupComp > 0 {
		add("I4", "%d reservations with more than one compensation task", dupComp)
	}
	if s.RedisCompensated > s.PGCompensated {
		add("I4", "Redis gave back %d units for %d authorized compensations", s.RedisCompensated, s.PGCompensated)
	}
	if d := s.PGInitial - s.PGAvailable - s.PGOccupied - s.PGSold; d != 0 {
		add("I7", "PostgreSQL initial %d != available %d + occupied %d + sold %d (delta %d)", s.PGInitial, s.PGAvailable, s.PGOccupied, s.PGSold, d)
	}
	if s.RedisPresent {
		if d := s.RedisInitial - s.RedisAvailable - s.RedisOpen - s.RedisCommitted; d != 0 {
			add("I7", "Redis initial %d != available %d + open_reserved %d + committed %d (delta %d)", s.RedisInitial, s.RedisAvailable, s.RedisOpen, s.RedisCommitted, d)
		}
		if quiescent && s.RedisCommitted != s.PGOccupied+s.PGSold {
			add("I7", "after quiescence Redis committed %d != PostgreSQL occupied %d + sold %d", s.RedisCommitted, s.PGOccupied, s.PGSold)
		}
		if s.RedisAvailable < 0 {
			add("I1", "negative Redis available %d", s.RedisAvailable)
		}
	}
	return s, out, nil
}
