package reservation_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
)

// capRig is a sale of skus SKUs (ids 101 on, stock each; newRig's SKU 7 is not one of them) with the given
// max_per_user in every SKU's meta hash, as sale set-up writes it.
func capRig(t *testing.T, maxPerUser, skus int, stock int64) (*rig, []lua.Keys) {
	t.Helper()
	r := newRig(t, 1)
	ctx := context.Background()
	now := time.Now()
	keys := make([]lua.Keys, skus)
	for i := range keys {
		keys[i] = lua.Keys{ActivityID: r.k.ActivityID, SKUID: int64(i + 101)}
		if _, err := lua.InitSKU(ctx, r.rdb, keys[i], lua.InitSKUArgs{Initial: stock, Available: stock,
			StartMS: now.Add(-time.Minute).UnixMilli(), EndMS: now.Add(time.Hour).UnixMilli(),
			OrderDeadline: 300 * time.Second, PaymentTimeout: time.Minute, Unmoved: true, MaxPerUser: maxPerUser}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, k := range keys {
			r.rdb.Del(ctx, k.Counter(), k.Meta(), k.SendDue(), k.Holders())
		}
	})
	return r, keys
}

func available(t *testing.T, r *rig, k lua.Keys) int64 {
	t.Helper()
	n, err := r.rdb.HGet(context.Background(), k.Counter(), "available").Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// One user bursts across 50 SKUs of one sale at once: exactly max_per_user
// reservations are admitted, every other request answers SALE_LIMIT_REACHED
// naming the held ones, and no refused SKU lost a unit.
func TestHoardingBurstAdmitsExactlyTheCap(t *testing.T) {
	for _, cap := range []int{1, 3} {
		t.Run(fmt.Sprintf("cap %d", cap), func(t *testing.T) {
			const skus, user = 50, int64(4242)
			r, keys := capRig(t, cap, skus, 5)
			ctx := context.Background()
			results := make([]reservation.Result, skus)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, k := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := r.res.Reserve(ctx, user, k.ActivityID, k.SKUID, uuid.New())
					if err != nil {
						t.Errorf("sku %d: %v", k.SKUID, err)
					}
					results[i] = res
				}()
			}
			close(start)
			wg.Wait()
			var admitted []uuid.UUID
			for i, res := range results {
				switch res.Code {
				case reservation.Queued:
					admitted = append(admitted, res.ReservationID)
					if got := available(t, r, keys[i]); got != 4 {
						t.Errorf("admitted sku %d: available %d, want 4", keys[i].SKUID, got)
					}
				case reservation.SaleLimitReached:
					if got := available(t, r, keys[i]); got != 5 {
						t.Errorf("refused sku %d: available %d, want 5 (untouched)", keys[i].SKUID, got)
					}
					if n := r.rdb.Exists(ctx, keys[i].User(user)).Val(); n != 0 {
						t.Errorf("refused sku %d has a user guard", keys[i].SKUID)
					}
				default:
					t.Errorf("sku %d: answer %+v", keys[i].SKUID, res)
				}
			}
			if len(admitted) != cap {
				t.Fatalf("admitted %d reservations, want exactly the cap %d", len(admitted), cap)
			}
			for _, res := range results {
				if res.Code != reservation.SaleLimitReached {
					continue
				}
				if res.Limit.MaxPerUser != cap || len(res.Limit.Held) != cap {
					t.Fatalf("SALE_LIMIT_REACHED names cap %d and %v, want cap %d and the %d admitted", res.Limit.MaxPerUser, res.Limit.Held, cap, cap)
				}
				for _, h := range res.Limit.Held {
					if !slices.Contains(admitted, h) {
						t.Fatalf("held %v is not one of the admitted %v", h, admitted)
					}
				}
			}
			if n := r.rdb.HLen(ctx, lua.Holds(r.k.ActivityID, user)).Val(); n != int64(cap) {
				t.Fatalf("holds hash has %d entries, want %d", n, cap)
			}
		})
	}
}

// At the cap, a retry of an admitted request still gets its reservation,
// a new request for a held SKU still answers ALREADY_RESERVED, and a
// compensated reservation frees its place for another SKU.
func TestCapAnswersAndCompensationFreesAPlace(t *testing.T) {
	const user = int64(77)
	r, keys := capRig(t, 1, 3, 5)
	ctx := context.Background()
	req := uuid.New()
	first, err := r.res.Reserve(ctx, user, keys[0].ActivityID, keys[0].SKUID, req)
	if err != nil || first.Code != reservation.Queued {
		t.Fatalf("first reserve: %+v, %v", first, err)
	}
	again, err := r.res.Reserve(ctx, user, keys[0].ActivityID, keys[0].SKUID, req)
	if err != nil || again.Code != reservation.Queued || !again.Duplicate || again.ReservationID != first.ReservationID {
		t.Fatalf("retry at the cap: %+v, %v; want QUEUED duplicate of %v", again, err, first.ReservationID)
	}
	same, err := r.res.Reserve(ctx, user, keys[0].ActivityID, keys[0].SKUID, uuid.New())
	if err != nil || same.Code != reservation.AlreadyReserved || same.ReservationID != first.ReservationID {
		t.Fatalf("new key for the held SKU: %+v, %v; want ALREADY_RESERVED %v", same, err, first.ReservationID)
	}
	other, err := r.res.Reserve(ctx, user, keys[1].ActivityID, keys[1].SKUID, uuid.New())
	if err != nil || other.Code != reservation.SaleLimitReached || !slices.Equal(other.Limit.Held, []uuid.UUID{first.ReservationID}) {
		t.Fatalf("another SKU at the cap: %+v, %v", other, err)
	}
	c, err := lua.Compensate(ctx, r.rdb, keys[0], lua.CompensateArgs{ReservationID: first.ReservationID.String(),
		CompensationID: "test-comp", UserID: user, NowMS: time.Now().UnixMilli(), TTL: time.Hour})
	if err != nil || c.Code != lua.Compensated {
		t.Fatalf("compensate: %+v, %v", c, err)
	}
	healed := testutil.ToFloat64(r.m.HoldsHealed)
	other, err = r.res.Reserve(ctx, user, keys[1].ActivityID, keys[1].SKUID, uuid.New())
	if err != nil || other.Code != reservation.Queued {
		t.Fatalf("after the compensation: %+v, %v; want QUEUED", other, err)
	}
	if got := testutil.ToFloat64(r.m.HoldsHealed) - healed; got != 1 {
		t.Fatalf("holds healed %v, want 1", got)
	}
	if got := available(t, r, keys[1]); got != 4 {
		t.Fatalf("sku 2 available %d, want 4", got)
	}
}

// A hold whose reservation was never written (a gateway died between the
// claim and reserve.lua) blocks the user only until the grace has passed.
func TestStaleHoldHealsAfterTheGrace(t *testing.T) {
	const user = int64(99)
	r, keys := capRig(t, 1, 2, 5)
	ctx := context.Background()
	base := time.Now()
	var offset atomic.Int64
	reservation.SetClock(r.res, func() time.Time { return base.Add(time.Duration(offset.Load())) })
	ghost := uuid.New()
	claimed, err := lua.HoldClaim(ctx, r.rdb, lua.HoldClaimArgs{ActivityID: r.k.ActivityID, UserID: user,
		Hold: lua.Hold{ReservationID: ghost.String(), SKUID: keys[0].SKUID, ClaimedAtMS: base.UnixMilli()}, Cap: 1, TTL: time.Hour})
	if err != nil || !claimed.Claimed {
		t.Fatalf("ghost claim: %+v, %v", claimed, err)
	}
	offset.Store(int64(reservation.DefaultHoldGrace - time.Second))
	res, err := r.res.Reserve(ctx, user, keys[1].ActivityID, keys[1].SKUID, uuid.New())
	if err != nil || res.Code != reservation.SaleLimitReached || !slices.Equal(res.Limit.Held, []uuid.UUID{ghost}) {
		t.Fatalf("inside the grace: %+v, %v; want SALE_LIMIT_REACHED naming %v", res, err, ghost)
	}
	if got := available(t, r, keys[1]); got != 5 {
		t.Fatalf("refused sku available %d, want 5", got)
	}
	offset.Store(int64(reservation.DefaultHoldGrace))
	res, err = r.res.Reserve(ctx, user, keys[1].ActivityID, keys[1].SKUID, uuid.New())
	if err != nil || res.Code != reservation.Queued {
		t.Fatalf("past the grace: %+v, %v; want QUEUED", res, err)
	}
	held := r.rdb.HKeys(ctx, lua.Holds(r.k.ActivityID, user)).Val()
	if !slices.Equal(held, []string{res.ReservationID.String()}) {
		t.Fatalf("holds %v, want only %v", held, res.ReservationID)
	}
}
