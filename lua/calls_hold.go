package lua

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- hold_claim.lua, hold_release.lua: a user's holds across a sale's SKUs

// Holds is the hash of one user's holds in one activity (reservation_id →
// "<sku_id> <claimed_at_ms>"), in a slot of its own: {a:<activity>:u:<user>}.
func Holds(activityID, userID int64) string {
	return fmt.Sprintf("seckill:{a:%d:u:%d}:holds", activityID, userID)
}

// Hold is one entry of a holds hash.
type Hold struct {
	ReservationID string
	SKUID         int64
	ClaimedAtMS   int64
}

// Entry is the hash value of h: "<sku_id> <claimed_at_ms>".
func (h Hold) Entry() string {
	return strconv.FormatInt(h.SKUID, 10) + " " + strconv.FormatInt(h.ClaimedAtMS, 10)
}

// ParseHold reads one entry of a holds hash.
func ParseHold(reservationID, entry string) (Hold, error) {
	sku, at, ok := strings.Cut(entry, " ")
	s, err1 := strconv.ParseInt(sku, 10, 64)
	a, err2 := strconv.ParseInt(at, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Hold{}, fmt.Errorf("holds entry %s = %q: %w", reservationID, entry, ErrBadReply)
	}
	return Hold{ReservationID: reservationID, SKUID: s, ClaimedAtMS: a}, nil
}

// HoldClaimArgs claims a hold for one reservation (hold_claim.lua).
type HoldClaimArgs struct {
	ActivityID, UserID int64
	Hold               Hold // the claim: reservation, SKU, now
	Cap                int
	TTL                time.Duration // garbage collection only
}

// Render returns the KEYS and ARGV of the call.
func (a HoldClaimArgs) Render() (keys []string, argv []any) {
	return []string{Holds(a.ActivityID, a.UserID)},
		[]any{a.Hold.ReservationID, a.Hold.SKUID, a.Hold.ClaimedAtMS, a.Cap, a.TTL.Milliseconds()}
}

// HoldClaimReply is hold_claim.lua's answer: Claimed, or the holds of a
// user at the cap.
type HoldClaimReply struct {
	Claimed bool
	Held    []Hold // when not Claimed
}

// HoldClaim runs hold_claim.lua.
func HoldClaim(ctx context.Context, rdb redis.Scripter, a HoldClaimArgs) (HoldClaimReply, error) {
	keys, argv := a.Render()
	return run(ctx, rdb, holdClaim, "hold_claim.lua", keys, argv, parseHoldClaim)
}

func parseHoldClaim(v any) (HoldClaimReply, error) {
	const script = "hold_claim.lua"
	a, err := array(script, v, 1)
	if err != nil {
		return HoldClaimReply{}, err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return HoldClaimReply{}, err
	}
	switch {
	case code == 1 && len(a) == 1:
		return HoldClaimReply{Claimed: true}, nil
	case code != -1:
		return HoldClaimReply{}, badReply(script, v, "unknown code %d", code)
	case len(a)%2 != 1:
		return HoldClaimReply{}, badReply(script, v, "held entries not in pairs")
	}
	r := HoldClaimReply{Held: make([]Hold, 0, len(a)/2)}
	for i := 1; i < len(a); i += 2 {
		rid, err := stringAt(script, v, a, i)
		if err != nil {
			return HoldClaimReply{}, err
		}
		entry, err := stringAt(script, v, a, i+1)
		if err != nil {
			return HoldClaimReply{}, err
		}
		h, err := ParseHold(rid, entry)
		if err != nil {
			return HoldClaimReply{}, badReply(script, v, "%v", err)
		}
		r.Held = append(r.Held, h)
	}
	return r, nil
}

// HoldReleaseArgs gives back one entry as the caller saw it (hold_release.lua).
type HoldReleaseArgs struct {
	ActivityID, UserID int64
	Hold               Hold
}

// Render returns the KEYS and ARGV of the call.
func (a HoldReleaseArgs) Render() (keys []string, argv []any) {
	return []string{Holds(a.ActivityID, a.UserID)}, []any{a.Hold.ReservationID, a.Hold.Entry()}
}

// HoldRelease runs hold_release.lua: true when the entry was released,
// false when it was not there or was renewed since.
func HoldRelease(ctx context.Context, rdb redis.Scripter, a HoldReleaseArgs) (bool, error) {
	keys, argv := a.Render()
	return run(ctx, rdb, holdRelease, "hold_release.lua", keys, argv, func(v any) (bool, error) {
		n, ok := v.(int64)
		if !ok || (n != 0 && n != 1) {
			return false, badReply("hold_release.lua", v, "want 0 or 1")
		}
		return n == 1, nil
	})
}
