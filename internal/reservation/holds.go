package reservation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
)

// DefaultHoldGrace is Options.HoldGrace's default: longer than a reserve
// request's budget (SECKILL_RESERVE_BUDGET, 1 s), so a claim whose
// reserve.lua is still on its way is never taken for a leak.
const DefaultHoldGrace = 5 * time.Second

// claimHold claims one of the user's max_per_user holds in the sale for the
// reservation h names (lua/hold_claim.lua, docs/spec.md#user-cap) before
// reserve.lua runs. At the cap it releases the entries that no longer stand
// for a reservation (heal) and claims once more. done means res is the
// answer: SALE_LIMIT_REACHED, or, when one of the holds is of this SKU, what
// reserve.lua would say of it (ALREADY_RESERVED, or the same request).
func (r *Reserver) claimHold(ctx context.Context, sku lua.SKU, k lua.Keys, userID int64, requestID uuid.UUID,
	h lua.Hold) (res Result, done bool, err error) {
	a := lua.HoldClaimArgs{ActivityID: sku.ActivityID, UserID: userID, Hold: h, Cap: max(sku.MaxPerUser, 1),
		TTL: r.opt.ReservationTTL}
	reply, err := lua.HoldClaim(ctx, r.opt.Scripts, a)
	if err != nil {
		return Result{}, true, fmt.Errorf("claim hold: %w", err)
	}
	if reply.Claimed {
		return Result{}, false, nil
	}
	live, freed, err := r.heal(ctx, sku.ActivityID, userID, reply.Held)
	if err != nil {
		return Result{}, true, err
	}
	if freed {
		if reply, err = lua.HoldClaim(ctx, r.opt.Scripts, a); err != nil {
			return Result{}, true, fmt.Errorf("claim hold: %w", err)
		}
		if reply.Claimed {
			return Result{}, false, nil
		}
		live = reply.Held
	}
	res = Result{Code: SaleLimitReached, Limit: &Limit{MaxPerUser: a.Cap, Held: []uuid.UUID{}}}
	for _, held := range live {
		if held.SKUID == sku.SKUID {
			res, err = r.alreadyReserved(ctx, k, held.ReservationID, requestID)
			return res, true, err
		}
		if rid, err := uuid.Parse(held.ReservationID); err == nil {
			res.Limit.Held = append(res.Limit.Held, rid)
		}
	}
	return res, true, nil
}

// heal sorts a user's held entries into those that still stand for a
// reservation (live) and those that do not, and releases the latter; freed
// reports that one was released. An entry stands for nothing once its
// reservation was compensated or cancelled (the unit is back), or when its
// reservation hash is missing past the grace (a gateway that died between
// the claim and reserve.lua, or a reserve.lua that did not admit and whose
// release was lost). The reads are one pipeline (each key in its SKU's slot).
func (r *Reserver) heal(ctx context.Context, activityID, userID int64, held []lua.Hold) (live []lua.Hold, freed bool, err error) {
	pipe := r.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(held))
	for i, h := range held {
		sku, err := r.buckets.SKU(ctx, activityID, h.SKUID)
		if err != nil {
			return nil, false, err
		}
		cmds[i] = pipe.HGet(ctx, sku.For(userID).Reservation(h.ReservationID), "status")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("read held reservations: %w", err)
	}
	now := r.now()
	for i, h := range held {
		status, err := cmds[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, false, fmt.Errorf("read held reservation %s: %w", h.ReservationID, err)
		}
		if !stale(status, h, now, r.opt.HoldGrace) {
			live = append(live, h)
			continue
		}
		ok, err := lua.HoldRelease(ctx, r.opt.Scripts, lua.HoldReleaseArgs{ActivityID: activityID, UserID: userID, Hold: h})
		if err != nil {
			return nil, false, fmt.Errorf("release stale hold: %w", err)
		}
		if ok {
			r.m.HoldsHealed.Inc()
			r.log.InfoContext(ctx, "reserve.hold_healed", "activity_id", activityID, "user_id", userID,
				"reservation_id", h.ReservationID, "sku_id", h.SKUID, "status", status)
		}
		freed = freed || ok
	}
	return live, freed, nil
}

// stale reports whether a held entry stands for no unit: its reservation's
// Redis status (empty: no hash) is COMPENSATED or CANCELLED, or there is no
// hash and the claim is older than grace.
func stale(status string, h lua.Hold, now time.Time, grace time.Duration) bool {
	if status == "" {
		return now.Sub(time.UnixMilli(h.ClaimedAtMS)) >= grace
	}
	st, err := state.ParseReservation(status)
	return err == nil && (st == state.ReservationCompensated || st == state.ReservationCancelled)
}

// keepsHold reports whether reserve.lua's reply holds the reservation the
// claim was for: admitted now, or the same reservation admitted before.
func keepsHold(reply lua.ReserveReply, h lua.Hold) bool {
	return reply.Code == lua.ReserveAdmitted || (reply.Code == lua.ReserveDuplicate && reply.ReservationID == h.ReservationID)
}

// releaseHold gives back the claim of a reservation reserve.lua did not
// admit. A failure only logs: the next claim at the cap heals it.
func (r *Reserver) releaseHold(ctx context.Context, activityID, userID int64, h lua.Hold) {
	if _, err := lua.HoldRelease(ctx, r.opt.Scripts, lua.HoldReleaseArgs{ActivityID: activityID, UserID: userID, Hold: h}); err != nil {
		r.log.WarnContext(ctx, "reserve.hold_release_failed", "activity_id", activityID, "user_id", userID,
			"reservation_id", h.ReservationID, "error", err)
	}
}
