package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// TestNoScriptCreatesACounter: only set-up (init_sku.lua) and the rebuild
// write a SKU's counter. A script that finds the counter missing (Redis lost
// it, a clean-up deleted the SKU, a bucket was never set up) writes nothing to
// it, so init_sku.lua and reconciliation still see the counter as lost instead
// of a hash with one stray total.
func TestNoScriptCreatesACounter(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	counterGone := func(t *testing.T, s sku, what string) {
		t.Helper()
		if n := rdb.Exists(ctx, s.k.Counter()).Val(); n != 0 {
			t.Fatalf("%s created the counter: %v", what, rdb.HGetAll(ctx, s.k.Counter()).Val())
		}
	}
	now := int64(startMS + 10)

	t.Run("reserve sold out on a bucket without counter", func(t *testing.T) {
		s := newSKU(t, rdb, 1)
		// A SKU of two buckets counts sold_out_hits on SOLD_OUT.
		a := initArgs(1, 1, true)
		a.Buckets = 2
		if _, err := lua.InitSKU(ctx, rdb, s.k, a); err != nil {
			t.Fatal(err)
		}
		rdb.Del(ctx, s.k.Counter())
		if res := s.reserve(t, "r1", 1, "q1", now); res.Code != lua.ReserveSoldOut {
			t.Fatalf("reserve on a missing counter = %+v, want SOLD_OUT", res)
		}
		counterGone(t, s, "reserve.lua's SOLD_OUT")
	})

	t.Run("send done for a missing reservation", func(t *testing.T) {
		s := newSKU(t, rdb, 1)
		rdb.Del(ctx, s.k.Counter())
		res, err := lua.SendDone(ctx, rdb, s.k, lua.SendDoneArgs{Outcome: lua.OutcomePublished, NextDueMS: now,
			Items: []lua.SendDoneItem{{ReservationID: "gone", RecheckMS: now}}})
		if err != nil || len(res) != 1 || res[0].Code != lua.SendDoneMissing {
			t.Fatalf("send_done = %+v %v, want MISSING", res, err)
		}
		counterGone(t, s, "send_done.lua's MISSING")
	})

	// A reservation whose counter was lost: every settling script refuses it.
	lost := func(t *testing.T) sku {
		s := newSKU(t, rdb, 2)
		if res := s.reserve(t, "r1", 1, "q1", now); res.Code != lua.ReserveAdmitted {
			t.Fatalf("reserve = %+v", res)
		}
		rdb.Del(ctx, s.k.Counter())
		return s
	}
	status := func(s sku) string { return rdb.HGet(ctx, s.k.Reservation("r1"), "status").Val() }

	t.Run("order created", func(t *testing.T) {
		s := lost(t)
		res, err := lua.OrderCreated(ctx, rdb, s.k, lua.OrderCreatedArgs{ReservationID: "r1", OrderID: "o1"})
		if err != nil || res.Code != lua.OrderCreatedMissing || res.Text != "COUNTER_MISSING" {
			t.Fatalf("order_created = %+v %v, want -1 COUNTER_MISSING", res, err)
		}
		if st := status(s); st != "RESERVED" {
			t.Fatalf("reservation moved to %s", st)
		}
		counterGone(t, s, "order_created.lua")
	})

	t.Run("compensate", func(t *testing.T) {
		s := lost(t)
		res, err := lua.Compensate(ctx, rdb, s.k, lua.CompensateArgs{ReservationID: "r1", CompensationID: "c1", UserID: 1,
			NowMS: now, TTL: time.Minute, FreeUserGuard: true})
		if err != nil || res.Code != lua.CompensateMissing || res.Text != "COUNTER_MISSING" {
			t.Fatalf("compensate = %+v %v, want -1 COUNTER_MISSING", res, err)
		}
		if st := status(s); st != "RESERVED" || rdb.Exists(ctx, s.k.CompensationMarker("r1")).Val() != 0 {
			t.Fatalf("compensation applied without a counter: status %s", st)
		}
		counterGone(t, s, "compensate.lua")
	})

	t.Run("release", func(t *testing.T) {
		s := newSKU(t, rdb, 2)
		s.reserve(t, "r1", 1, "q1", now)
		if res, err := lua.OrderCreated(ctx, rdb, s.k, lua.OrderCreatedArgs{ReservationID: "r1", OrderID: "o1"}); err != nil || res.Code != lua.OrderCreatedProjected {
			t.Fatalf("order_created = %+v %v", res, err)
		}
		rdb.Del(ctx, s.k.Counter())
		res, err := lua.Release(ctx, rdb, s.k, lua.ReleaseArgs{ReservationID: "r1", ReleaseID: "RELEASE:o1", NowMS: now, TTL: time.Minute})
		if err != nil || res.Code != lua.ReleaseMissing || res.Text != "COUNTER_MISSING" {
			t.Fatalf("release = %+v %v, want -1 COUNTER_MISSING", res, err)
		}
		if st := status(s); st != "ORDER_CREATED" {
			t.Fatalf("reservation moved to %s", st)
		}
		counterGone(t, s, "release.lua")
	})

	t.Run("set-up over a half counter", func(t *testing.T) {
		s := newSKU(t, rdb, 3)
		// What an older reserve.lua left: a hash with one stray total.
		rdb.Del(ctx, s.k.Counter())
		rdb.HSet(ctx, s.k.Counter(), "sold_out_hits", 4)
		res, err := lua.InitSKU(ctx, rdb, s.k, initArgs(3, 2, false))
		if err != nil || res.Code != lua.InitSKUNeedsRebuild {
			t.Fatalf("init over a half counter with moved stock = %+v %v, want needs rebuild", res, err)
		}
		res, err = lua.InitSKU(ctx, rdb, s.k, initArgs(3, 3, true))
		if err != nil || res.Code != lua.InitSKUCreated {
			t.Fatalf("init over a half counter, unmoved = %+v %v, want created", res, err)
		}
		if c := s.counters(t); c["initial"] != "3" || c["available"] != "3" || c["sold_out_hits"] != "" {
			t.Fatalf("counters after set-up = %v", c)
		}
	})
}
