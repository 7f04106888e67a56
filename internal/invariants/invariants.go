// Package invariants checks the invariants (docs/spec.md#invariants) on the real
// stores of one (activity, sku): the demo, the end-to-end tests and
// operators run the same checks.
package invariants

import (
	"context"
	"fmt"
	"time"

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
	// RedisReleased counts units release.lua gave back for cancelled orders.
	RedisReleased int64
	// Orders by status, and payment facts for I5.
	Paid, Cancelled, Refunding, Refunded, OpenOrders   int64
	ReleasedRows, SoldRows                             int64
	PaidButReleased, CancelledWithPayment, PaidNoMoney int64
	// ExtraPayments counts successful payments of paid orders beyond the one
	// that paid it, not (yet) refunded.
	ExtraPayments int64
	RedisPresent  bool
	// Buckets is the SKU's stock bucket count (docs/scale.md). The Redis
	// figures above are sums over its buckets; RedisInTransfer is the units
	// taken from one bucket by a transfer and not yet given to the other.
	Buckets         int               `json:"buckets"`
	RedisInTransfer int64             `json:"redis_in_transfer"`
	RedisBuckets    []lua.BucketStock `json:"redis_buckets,omitempty"`
}

// RedisDelta is the SKU's Redis conservation error over its buckets: Σ
// initial − Σ available − in transfer − Σ open_reserved − Σ committed.
func (s Snapshot) RedisDelta() int64 {
	return s.RedisInitial - s.RedisAvailable - s.RedisInTransfer - s.RedisOpen - s.RedisCommitted
}

// Take reads the snapshot.
func Take(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, activityID, skuID int64) (Snapshot, error) {
	var s Snapshot
	if err := pool.QueryRow(ctx, `
		SELECT i.initial_stock, i.available_stock, i.occupied_stock, i.sold_stock, i.buckets,
		       (SELECT count(*) FROM orders o WHERE o.activity_id = i.activity_id AND o.sku_id = i.sku_id
		          AND o.status NOT IN ('CANCELLED', 'REFUNDED'))
		FROM sku_inventory i WHERE i.activity_id = $1 AND i.sku_id = $2`, activityID, skuID).
		Scan(&s.PGInitial, &s.PGAvailable, &s.PGOccupied, &s.PGSold, &s.Buckets, &s.ValidOrders); err != nil {
		return s, fmt.Errorf("read sku_inventory %d/%d: %w", activityID, skuID, err)
	}
	if err := s.readRedis(ctx, rdb, lua.SKU{ActivityID: activityID, SKUID: skuID, Buckets: s.Buckets}); err != nil {
		return s, err
	}
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'PAID'),
		       count(*) FILTER (WHERE status = 'CANCELLED'),
		       count(*) FILTER (WHERE status = 'REFUNDING'),
		       count(*) FILTER (WHERE status = 'REFUNDED'),
		       count(*) FILTER (WHERE status IN ('CREATED', 'PAYING', 'CANCEL_PENDING')
		           AND expires_at < clock_timestamp() - $3::interval),
		       (SELECT count(*) FROM inventory_ledger l WHERE l.activity_id = $1 AND l.sku_id = $2 AND l.change_type = 'RELEASE'),
		       (SELECT count(*) FROM inventory_ledger l WHERE l.activity_id = $1 AND l.sku_id = $2 AND l.change_type = 'SELL'),
		       count(*) FILTER (WHERE status = 'PAID' AND EXISTS (SELECT 1 FROM inventory_ledger l
		           WHERE l.order_id = orders.order_id AND l.change_type = 'RELEASE')),
		       count(*) FILTER (WHERE status = 'CANCELLED' AND EXISTS (SELECT 1 FROM payment_record p
		           WHERE p.order_id = orders.order_id AND p.status = 'SUCCESS')),
		       count(*) FILTER (WHERE status = 'PAID' AND NOT EXISTS (SELECT 1 FROM payment_record p
		           WHERE p.order_id = orders.order_id AND p.status = 'SUCCESS')),
		       COALESCE(sum((SELECT count(*) FROM payment_record p WHERE p.order_id = orders.order_id
		           AND p.status IN ('SUCCESS', 'REFUNDING') AND p.payment_id <> orders.payment_id)) FILTER (WHERE status = 'PAID'), 0)
		FROM orders WHERE activity_id = $1 AND sku_id = $2`, activityID, skuID, OverdueGrace.String()).
		Scan(&s.Paid, &s.Cancelled, &s.Refunding, &s.Refunded, &s.OpenOrders, &s.ReleasedRows, &s.SoldRows,
			&s.PaidButReleased, &s.CancelledWithPayment, &s.PaidNoMoney, &s.ExtraPayments); err != nil {
		return s, fmt.Errorf("read orders: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2
		AND status IN ('COMPENSATING', 'COMPENSATED')`, activityID, skuID).Scan(&s.PGCompensated); err != nil {
		return s, fmt.Errorf("count compensations: %w", err)
	}
	return s, nil
}

// readRedis sums the counters of every bucket (lua.ReadBuckets: one
// pipeline; on Redis Cluster it is split by slot).
func (s *Snapshot) readRedis(ctx context.Context, rdb redis.Cmdable, sku lua.SKU) error {
	buckets, err := lua.ReadBuckets(ctx, rdb, sku.Bucket(0), max(sku.Buckets, 1))
	if err != nil {
		return fmt.Errorf("read redis counters: %w", err)
	}
	var in, out int64
	for _, b := range buckets {
		s.RedisPresent = s.RedisPresent || b.Exists
		s.RedisInitial += b.Initial
		s.RedisAvailable += b.Available
		s.RedisOpen += b.OpenReserved
		s.RedisCommitted += b.Committed
		s.RedisCompensated += b.Compensated
		s.RedisReleased += b.Released
		in, out = in+b.XferIn, out+b.XferOut
	}
	if sku.Buckets > 1 {
		s.RedisBuckets = buckets
	}
	s.RedisInTransfer = out - in
	return nil
}

// OverdueGrace is how long past its payment deadline an order may still be
// open (the cancel path's retries) before I6 calls it stuck.
const OverdueGrace = time.Minute

// Violation is one broken invariant, named as in docs/spec.md (I1..I7).
type Violation struct {
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
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
	checkMoney(s, quiescent, add)
	checkStock(s, quiescent, add)
	return s, out, nil
}

// checkMoney adds the violations of I5 and I6 (paid orders, refunds, open orders).
func checkMoney(s Snapshot, quiescent bool, add func(inv, format string, a ...any)) {
	if s.PaidButReleased > 0 {
		add("I5", "%d PAID orders had their stock released (a paid order was cancelled)", s.PaidButReleased)
	}
	if s.PaidNoMoney > 0 {
		add("I5", "%d PAID orders without a successful payment record", s.PaidNoMoney)
	}
	if s.PGSold != s.Paid || s.SoldRows != s.Paid {
		add("I5", "sold stock %d / SELL ledger rows %d != PAID orders %d", s.PGSold, s.SoldRows, s.Paid)
	}
	if quiescent {
		if s.CancelledWithPayment > 0 || s.Refunding > 0 {
			add("I5", "%d cancelled orders hold an unrefunded payment, %d refunds unfinished", s.CancelledWithPayment, s.Refunding)
		}
		if s.ExtraPayments > 0 {
			add("I5", "%d second payments of paid orders not refunded", s.ExtraPayments)
		}
		if released := s.Cancelled + s.Refunding + s.Refunded; s.ReleasedRows != released {
			add("I5", "stock released %d times for %d cancelled orders", s.ReleasedRows, released)
		}
		if s.RedisPresent && s.RedisReleased != s.ReleasedRows {
			add("I5", "Redis released %d units for %d cancelled orders", s.RedisReleased, s.ReleasedRows)
		}
	}
	if s.OpenOrders > 0 {
		add("I6", "%d orders still open (CREATED, PAYING, CANCEL_PENDING) more than %s past their payment deadline", s.OpenOrders, OverdueGrace)
	}
}

// checkStock adds the violations of I7 (stock conservation) and of negative stock.
func checkStock(s Snapshot, quiescent bool, add func(inv, format string, a ...any)) {
	if d := s.PGInitial - s.PGAvailable - s.PGOccupied - s.PGSold; d != 0 {
		add("I7", "PostgreSQL initial %d != available %d + occupied %d + sold %d (delta %d)", s.PGInitial, s.PGAvailable, s.PGOccupied, s.PGSold, d)
	}
	if s.RedisPresent {
		if d := s.RedisDelta(); d != 0 {
			add("I7", "Redis initial %d != available %d + in transfer %d + open_reserved %d + committed %d (delta %d)",
				s.RedisInitial, s.RedisAvailable, s.RedisInTransfer, s.RedisOpen, s.RedisCommitted, d)
		}
		for _, b := range s.RedisBuckets {
			if d := b.Balance(); d != 0 || b.Available < 0 {
				add("I7", "Redis bucket %d: initial %d + transferred in %d - out %d != available %d + open_reserved %d + committed %d (delta %d)",
					b.Bucket, b.Initial, b.XferIn, b.XferOut, b.Available, b.OpenReserved, b.Committed, d)
			}
		}
		if s.RedisInTransfer < 0 {
			add("I7", "Redis buckets received %d more units by transfer than were given", -s.RedisInTransfer)
		}
		if quiescent && s.RedisCommitted != s.PGOccupied+s.PGSold {
			add("I7", "after quiescence Redis committed %d != PostgreSQL occupied %d + sold %d", s.RedisCommitted, s.PGOccupied, s.PGSold)
		}
		if s.RedisAvailable < 0 {
			add("I1", "negative Redis available %d", s.RedisAvailable)
		}
	}
}
