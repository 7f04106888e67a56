package explain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Redis is what Redis holds of the reservation: its hash (the admission
// record and its projection), the request map and user guard that make a
// retry and a second reservation of the same user find it, its send_due
// entry (the message is still owed) and the markers that make compensation
// and release happen at most once.
type Redis struct {
	Hash map[string]string `json:"hash,omitempty"`
	// HashTTL is how long the hash is kept (0: no expiry or gone).
	HashTTL            time.Duration `json:"hash_ttl,omitempty"`
	RequestMap         string        `json:"request_map,omitempty"`
	UserGuard          string        `json:"user_guard,omitempty"`
	SendDueAt          *time.Time    `json:"send_due_at,omitempty"`
	CompensationMarker string        `json:"compensation_marker,omitempty"`
	ReleaseMarker      string        `json:"release_marker,omitempty"`
}

// findInRedis looks for a reservation hash with id among the active SKUs
// (a reservation PostgreSQL never saw): those of activityID only when it is
// positive, with the lookups pipelined (findBatch per round trip).
func (e *Explainer) findInRedis(ctx context.Context, id uuid.UUID, activityID int64) (lua.Keys, bool, error) {
	members, err := e.rdb.SMembers(ctx, lua.ActiveSKUs).Result()
	if err != nil {
		return lua.Keys{}, false, fmt.Errorf("explain %s: list active SKUs: %w", id, err)
	}
	var keys []lua.Keys
	for _, m := range members {
		if k, err := lua.ParseMember(m); err == nil && (activityID <= 0 || k.ActivityID == activityID) {
			keys = append(keys, k)
		}
	}
	for len(keys) > 0 {
		batch := keys[:min(findBatch, len(keys))]
		keys = keys[len(batch):]
		pipe := e.rdb.Pipeline()
		found := make([]*redis.IntCmd, len(batch))
		for i, k := range batch {
			found[i] = pipe.Exists(ctx, k.Reservation(id.String()))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return lua.Keys{}, false, fmt.Errorf("explain %s: look in Redis: %w", id, err)
		}
		for i, f := range found {
			if f.Val() == 1 {
				return batch[i], true, nil
			}
		}
	}
	return lua.Keys{}, false, nil
}

// findBatch is how many SKUs findInRedis asks about per round trip.
const findBatch = 256

// readRedis fills the Redis part of the report and its events.
func (e *Explainer) readRedis(ctx context.Context, rep *Report) error {
	k := lua.Keys{ActivityID: rep.ActivityID, SKUID: rep.SKUID, Bucket: rep.Bucket}
	rid := rep.ReservationID.String()
	pipe := e.rdb.Pipeline()
	hash := pipe.HGetAll(ctx, k.Reservation(rid))
	ttl := pipe.PTTL(ctx, k.Reservation(rid))
	due := pipe.ZScore(ctx, k.SendDue(), rid)
	comp := pipe.Get(ctx, k.CompensationMarker(rid))
	rel := pipe.Get(ctx, k.ReleaseMarker(rid))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("explain %s: read Redis: %w", rid, err)
	}
	r := &rep.Redis
	r.Hash = hash.Val()
	if d := ttl.Val(); d > 0 {
		r.HashTTL = d
	}
	if due.Err() == nil {
		t := time.UnixMilli(int64(due.Val())).UTC()
		r.SendDueAt = &t
	}
	r.CompensationMarker, r.ReleaseMarker = comp.Val(), rel.Val()
	rep.Status.Redis = Absent
	if len(r.Hash) > 0 {
		rep.Status.Redis = r.Hash["status"]
		if err := e.readGuards(ctx, k, rep); err != nil {
			return err
		}
	}
	rep.Timeline = append(rep.Timeline, redisEvents(k, rep, e.now())...)
	return nil
}

// readGuards reads the request map and the user guard the hash names.
func (e *Explainer) readGuards(ctx context.Context, k lua.Keys, rep *Report) error {
	h := rep.Redis.Hash
	user, err := strconv.ParseInt(h["user_id"], 10, 64)
	if err != nil {
		return nil // a hash without a user (rebuilt partially): nothing to follow
	}
	pipe := e.rdb.Pipeline()
	req := pipe.Get(ctx, k.Request(user, h["request_id"]))
	guard := pipe.Get(ctx, k.User(user))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("explain %s: read Redis guards: %w", rep.ReservationID, err)
	}
	rep.Redis.RequestMap, rep.Redis.UserGuard = req.Val(), guard.Val()
	return nil
}

// redisEvents turns the hash's times into events.
func redisEvents(k lua.Keys, rep *Report, now time.Time) []Event {
	h := rep.Redis.Hash
	key := k.Reservation(rep.ReservationID.String())
	var out []Event
	add := func(field, what string) {
		if ms, err := strconv.ParseInt(h[field], 10, 64); err == nil && ms > 0 {
			out = append(out, Event{At: time.UnixMilli(ms).UTC(), Source: "redis " + key, What: what})
		}
	}
	add("reserved_at_ms", "admitted in Redis (QUEUED answered)")
	add("compensated_at_ms", "unit given back in Redis (compensate.lua)")
	add("released_at_ms", "unit given back in Redis (release.lua)")
	if len(h) > 0 {
		detail := map[string]any{}
		for f, v := range h {
			detail[f] = v
		}
		at := now.UTC()
		out = append(out, Event{At: at, Source: "redis " + key, What: "now " + h["status"] + ", message " + h["mq_state"] +
			", " + h["send_attempts"] + " send attempt(s)", Detail: detail})
	}
	return out
}
