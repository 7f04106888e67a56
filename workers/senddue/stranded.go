package senddue

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// A broker group whose master is gone for good keeps the messages it stored,
// and no consumer reads them until it is back. The scanner would send a
// published reservation again only after its business deadline (its
// recheck), by which time it is rejected. So when a group leaves the
// topic's route (Options.Brokers, polled every RouteEvery), every reservation
// of every active SKU that waits with a future due time (published and
// awaiting its recheck, or backing off) is made due now: the scanner sends
// each again with its own message_id, to a broker the route still has, and
// the saga starter's inbox absorbs the copies of those that had arrived.

// strandedBatch is how many send_due members one command moves.
const strandedBatch = 500

// watchBrokers polls the route until ctx ends and sweeps when a group left it.
func (s *Scanner) watchBrokers(ctx context.Context) {
	var prev map[string]bool
	t := time.NewTicker(s.opt.RouteEvery)
	defer t.Stop()
	for {
		cur, err := s.opt.Brokers(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("senddue.route_failed", "error", err)
			}
		} else {
			if gone := leftRoute(prev, cur); len(gone) > 0 {
				s.sweepStranded(ctx, gone)
			}
			prev = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// leftRoute lists the groups of prev that cur does not have (sorted).
func leftRoute(prev, cur map[string]bool) []string {
	var gone []string
	for b := range prev {
		if !cur[b] {
			gone = append(gone, b)
		}
	}
	slices.Sort(gone)
	return gone
}

// sweepStranded makes every waiting reservation of every active SKU due now
// and returns how many it moved.
func (s *Scanner) sweepStranded(ctx context.Context, gone []string) int {
	members, err := s.rdb.SMembers(ctx, s.opt.ActiveSKUs).Result()
	if err != nil {
		s.log.Error("senddue.stranded_sweep_failed", "brokers", gone, "error", err)
		return 0
	}
	now := s.now().UnixMilli()
	moved := 0
	for _, m := range members {
		k, err := lua.ParseMember(m)
		if err != nil {
			continue // ScanOnce logs it
		}
		n, err := makeDue(ctx, s.rdb, k.SendDue(), now)
		moved += n
		if err != nil {
			s.log.Warn("senddue.stranded_sweep_failed", "brokers", gone, "activity_id", k.ActivityID, "sku_id", k.SKUID,
				"bucket", k.Bucket, "error", err)
		}
	}
	s.log.Warn("senddue.broker_left_route", "brokers", gone, "made_due", moved)
	s.m.SendStranded.Add(float64(moved))
	return moved
}

// makeDue gives every member of the send_due zset key with a due time after
// nowMS the due time nowMS (members settled meanwhile stay out: ZADD XX).
// It stops after one pass over the set's size, so that items a scanner
// claims meanwhile (their due time moves to the end of the claim) are not
// chased.
func makeDue(ctx context.Context, rdb redis.Cmdable, key string, nowMS int64) (int, error) {
	size, err := rdb.ZCard(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	moved := 0
	for int64(moved) <= size {
		ids, err := rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(nowMS, 10), Max: "+inf",
			Count: strandedBatch}).Result()
		if err != nil || len(ids) == 0 {
			return moved, err
		}
		zs := make([]redis.Z, len(ids))
		for i, id := range ids {
			zs[i] = redis.Z{Score: float64(nowMS), Member: id}
		}
		if err := rdb.ZAddXX(ctx, key, zs...).Err(); err != nil {
			return moved, err
		}
		moved += len(ids)
		if len(ids) < strandedBatch {
			return moved, nil
		}
	}
	return moved, nil
}
