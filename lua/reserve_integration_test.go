package lua_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

const (
	startMS    = 1_000_000
	endMS      = 2_000_000
	deadlineMS = 300_000
	ttlMS      = 3_600_000
)

type sku struct {
	k   lua.Keys
	rdb redis.UniversalClient
}

func newSKU(t *testing.T, rdb redis.UniversalClient, stock int) sku {
	t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 1}
	res, err := lua.InitSKU(ctx, rdb, k, initArgs(stock, stock, true))
	if err != nil || res.Code != lua.InitSKUCreated {
		t.Fatalf("init sku: %v %v", res, err)
	}
	t.Cleanup(func() {
		testenv.DeleteSKUKeys(ctx, rdb, k)
	})
	return sku{k, rdb}
}

// initArgs is init_sku.lua's call for the test sale window.
func initArgs(initial, available int, unmoved bool) lua.InitSKUArgs {
	return lua.InitSKUArgs{Initial: int64(initial), Available: int64(available), StartMS: startMS, EndMS: endMS,
		OrderDeadline: deadlineMS * time.Millisecond, PaymentTimeout: time.Minute, Unmoved: unmoved}
}

func (s sku) reserve(t *testing.T, rid string, user int64, req string, now int64) lua.ReserveReply {
	t.Helper()
	res, err := lua.Reserve(context.Background(), s.rdb, s.k, lua.ReserveArgs{ReservationID: rid, MessageID: "m-" + rid,
		RequestID: req, UserID: user, NowMS: now, KeyVersion: 1, SchemaVersion: 1, TTL: ttlMS * time.Millisecond,
		SendDueAtMS: now + 3000})
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return res
}

func (s sku) counters(t *testing.T) map[string]string {
	t.Helper()
	c, err := s.rdb.HGetAll(context.Background(), s.k.Counter()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReserveOutcomes(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	now := int64(startMS + 10)

	cases := []struct {
		name     string
		stock    int
		setup    func(t *testing.T, s sku)
		rid      string
		user     int64
		req      string
		now      int64
		wantCode lua.ReserveCode
		wantRID  string
		// counters after: available, open_reserved
		wantAvail, wantOpen string
	}{
		{name: "admitted", stock: 2, rid: "r1", user: 1, req: "q1", now: now, wantCode: lua.ReserveAdmitted, wantRID: "r1", wantAvail: "1", wantOpen: "1"},
		{name: "same request again", stock: 2, setup: func(t *testing.T, s sku) { s.reserve(t, "r1", 1, "q1", now) },
			rid: "r1", user: 1, req: "q1", now: now, wantCode: lua.ReserveDuplicate, wantRID: "r1", wantAvail: "1", wantOpen: "1"},
		{name: "request map lost, reservation kept", stock: 2, setup: func(t *testing.T, s sku) {
			s.reserve(t, "r1", 1, "q1", now)
			s.rdb.Del(ctx, s.k.Request(1, "q1"))
		}, rid: "r1", user: 1, req: "q1", now: now, wantCode: lua.ReserveDuplicate, wantRID: "r1", wantAvail: "1", wantOpen: "1"},
		{name: "request map and reservation lost, user guard kept", stock: 2, setup: func(t *testing.T, s sku) {
			s.reserve(t, "r1", 1, "q1", now)
			s.rdb.Del(ctx, s.k.Request(1, "q1"), s.k.Reservation("r1"))
		}, rid: "r1", user: 1, req: "q1", now: now, wantCode: lua.ReserveDuplicate, wantRID: "r1", wantAvail: "1", wantOpen: "1"},
		{name: "second reservation by the same user", stock: 2, setup: func(t *testing.T, s sku) { s.reserve(t, "r1", 1, "q1", now) },
			rid: "r2", user: 1, req: "q2", now: now, wantCode: lua.ReserveAlreadyReserved, wantRID: "r1", wantAvail: "1", wantOpen: "1"},
		{name: "sold out", stock: 1, setup: func(t *testing.T, s sku) { s.reserve(t, "r1", 1, "q1", now) },
			rid: "r2", user: 2, req: "q2", now: now, wantCode: lua.ReserveSoldOut, wantAvail: "0", wantOpen: "1"},
		{name: "zero stock", stock: 0, rid: "r1", user: 1, req: "q1", now: now, wantCode: lua.ReserveSoldOut, wantAvail: "0", wantOpen: "0"},
		{name: "not started", stock: 2, rid: "r1", user: 1, req: "q1", now: startMS - 1, wantCode: lua.ReserveNotStarted, wantAvail: "2", wantOpen: "0"},
		{name: "ended", stock: 2, rid: "r1", user: 1, req: "q1", now: endMS, wantCode: lua.ReserveEnded, wantAvail: "2", wantOpen: "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSKU(t, rdb, c.stock)
			if c.setup != nil {
				c.setup(t, s)
			}
			res := s.reserve(t, c.rid, c.user, c.req, c.now)
			if res.Code != c.wantCode || res.ReservationID != c.wantRID {
				t.Fatalf("reserve = %+v, want code %d rid %q", res, c.wantCode, c.wantRID)
			}
			cn := s.counters(t)
			if cn["available"] != c.wantAvail || cn["open_reserved"] != c.wantOpen {
				t.Fatalf("counters = %v, want available %s open_reserved %s", cn, c.wantAvail, c.wantOpen)
			}
			if cn["initial"] != fmt.Sprint(c.stock) || atoi(cn["available"])+atoi(cn["open_reserved"])+atoi(cn["committed"]) != c.stock {
				t.Fatalf("conservation broken: %v", cn)
			}
			if c.wantCode == lua.ReserveAdmitted {
				h, _ := rdb.HGetAll(ctx, s.k.Reservation(c.rid)).Result()
				for _, f := range []string{"status", "mq_state", "activity_id", "sku_id", "user_id", "request_id",
					"reservation_id", "message_id", "schema_version", "key_version", "reserved_at_ms",
					"business_deadline_ms", "send_attempts", "last_error"} {
					if _, ok := h[f]; !ok {
						t.Errorf("reservation hash lacks recovery field %s", f)
					}
				}
				if h["status"] != "RESERVED" || h["mq_state"] != "PENDING" || h["business_deadline_ms"] != fmt.Sprint(c.now+deadlineMS) {
					t.Errorf("reservation hash = %v", h)
				}
				if score, err := rdb.ZScore(ctx, s.k.SendDue(), c.rid).Result(); err != nil || int64(score) != c.now+3000 {
					t.Errorf("send_due score = %v, %v", score, err)
				}
				if ttl := rdb.PTTL(ctx, s.k.Reservation(c.rid)).Val(); ttl.Milliseconds() <= deadlineMS {
					t.Errorf("reservation TTL %v is not longer than the business deadline", ttl)
				}
			}
		})
	}
	// The holders hash follows the user guards, with a version bumped on
	// every change, which SOLD_OUT reports.
	t.Run("holders", func(t *testing.T) {
		s := newSKU(t, rdb, 1)
		s.reserve(t, "r1", 1, "q1", now)
		if h := rdb.HGet(ctx, s.k.Holders(), "1").Val(); h != "r1 q1" {
			t.Fatalf("holders entry = %q", h)
		}
		if res := s.reserve(t, "r2", 2, "q2", now); res.Code != lua.ReserveSoldOut || res.HoldersVersion != 1 {
			t.Fatalf("sold out = %+v, want holders version 1", res)
		}
		rdb.HSet(ctx, s.k.Reservation("r1"), "status", "ORDER_REJECTED")
		c, err := lua.Compensate(ctx, rdb, s.k, lua.CompensateArgs{ReservationID: "r1", CompensationID: "c1", UserID: 1, NowMS: now,
			TTL: time.Hour, FreeUserGuard: true})
		if err != nil || c.Code != lua.Compensated || rdb.HExists(ctx, s.k.Holders(), "1").Val() || rdb.Exists(ctx, s.k.User(1)).Val() != 0 {
			t.Fatalf("compensate freeing the guard = %+v, %v; holders %v", c, err, rdb.HGetAll(ctx, s.k.Holders()).Val())
		}
		if v := s.counters(t)["holders_version"]; v != "2" {
			t.Fatalf("holders_version after the guard was freed = %s, want 2", v)
		}
	})
	t.Run("not configured", func(t *testing.T) {
		k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 9}
		s := sku{k, rdb}
		res := s.reserve(t, "r1", 1, "q1", now)
		if res.Code != lua.ReserveNotConfigured {
			t.Fatalf("reserve on unknown sku = %+v", res)
		}
		if n := rdb.Exists(ctx, k.Counter(), k.Reservation("r1"), k.User(1), k.SendDue()).Val(); n != 0 {
			t.Fatalf("unknown sku: %d keys written", n)
		}
	})
}

func TestInitSKUNeverResetsLiveStock(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	s := newSKU(t, rdb, 5)
	s.reserve(t, "r1", 1, "q1", startMS+1)
	res, err := lua.InitSKU(context.Background(), rdb, s.k, initArgs(5, 5, true))
	if err != nil || res.Code != lua.InitSKUKept || res.Available != 4 {
		t.Fatalf("second init = %+v %v, want kept with available 4", res, err)
	}
	if cn := s.counters(t); cn["available"] != "4" || cn["open_reserved"] != "1" {
		t.Fatalf("counters reset: %v", cn)
	}
	// Counters lost while PostgreSQL shows movements: refuse, write nothing.
	rdb.Del(context.Background(), s.k.Counter())
	res, _ = lua.InitSKU(context.Background(), rdb, s.k, initArgs(5, 4, false))
	if res.Code != lua.InitSKUNeedsRebuild || rdb.Exists(context.Background(), s.k.Counter()).Val() != 0 {
		t.Fatalf("init over moved stock = %+v, counters written", res)
	}
}

func TestSendClaimAndDone(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	s := newSKU(t, rdb, 10)
	now := int64(startMS + 10)
	for i := range 3 {
		s.reserve(t, fmt.Sprintf("r%d", i), int64(i+1), fmt.Sprintf("q%d", i), now)
	}
	claim := func(at, lease int64, max int) []lua.Claimed {
		out, err := lua.SendClaim(ctx, rdb, s.k, lua.SendClaimArgs{NowMS: at, LeaseUntilMS: lease, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := claim(now+2999, now+10000, 10); len(got) != 0 {
		t.Fatalf("claimed before due: %v", got)
	}
	got := claim(now+3000, now+10000, 2)
	if len(got) != 2 {
		t.Fatalf("claim of 2 due items = %v", got)
	}
	if n := rdb.ZCard(ctx, s.k.SendDue()).Val(); n != 3 {
		t.Fatalf("claim removed items from send_due: %d left", n)
	}
	if score := rdb.ZScore(ctx, s.k.SendDue(), got[0].ReservationID).Val(); int64(score) != now+10000 {
		t.Fatalf("claimed score = %v, want lease end", score)
	}
	// A second scanner sees only the unclaimed one; after the lease it sees all.
	if again := claim(now+3000, now+10000, 10); len(again) != 1 {
		t.Fatalf("second claim = %v, want the 1 unclaimed", again)
	}
	if expired := claim(now+10000, now+20000, 10); len(expired) != 3 {
		t.Fatalf("claim after lease end = %v, want all 3", expired)
	}
	done := func(rid, outcome string) lua.SendDoneReply {
		res, err := lua.SendDone(ctx, rdb, s.k, lua.SendDoneArgs{Outcome: outcome, NextDueMS: now + 50000, ErrText: "boom",
			Items: []lua.SendDoneItem{{ReservationID: rid, RecheckMS: now + 900000}}})
		if err != nil || len(res) != 1 {
			t.Fatal(res, err)
		}
		return res[0]
	}
	score := func(rid string) int64 { return int64(rdb.ZScore(ctx, s.k.SendDue(), rid).Val()) }
	// Published: stays in send_due, not due again before the recheck time.
	if r := done("r0", "PUBLISHED"); r.Code != lua.SendDoneRecorded || r.State != "PUBLISHED" || score("r0") != now+900000 {
		t.Fatalf("published = %v, score %d, want kept for the recheck", r, score("r0"))
	}
	// A late failure (another sender) never re-queues a published message.
	if r := done("r0", "FAILED"); r.State != "PUBLISHED" || score("r0") != now+900000 ||
		rdb.HGet(ctx, s.k.Reservation("r0"), "mq_state").Val() != "PUBLISHED" {
		t.Fatalf("late failure after publish = %v, score %d", r, score("r0"))
	}
	if r := done("r1", "UNKNOWN"); r.State != "UNKNOWN" || score("r1") != now+50000 {
		t.Fatalf("unknown = %v, not rescheduled", r)
	}
	// No attempt limit: a hundred failures later it is still due, still UNKNOWN.
	for range 100 {
		done("r1", "FAILED")
	}
	if r := done("r1", "FAILED"); r.Code != lua.SendDoneRecorded || r.State != "UNKNOWN" || score("r1") != now+50000 {
		t.Fatalf("after 102 attempts = %v, score %d: gave up?", r, score("r1"))
	}
	if a := rdb.HGet(ctx, s.k.Reservation("r1"), "send_attempts").Val(); a != "102" {
		t.Fatalf("send_attempts = %s, want 102", a)
	}
	// Settled (order projected / compensated) meanwhile: taken out, nothing recorded.
	rdb.HSet(ctx, s.k.Reservation("r1"), "status", "ORDER_CREATED")
	if r := done("r1", "PUBLISHED"); r.Code != lua.SendDoneSettled || rdb.ZScore(ctx, s.k.SendDue(), "r1").Err() != redis.Nil {
		t.Fatalf("settled = %v, still in send_due?", r)
	}
	rdb.Del(ctx, s.k.Reservation("r2"))
	if r := done("r2", "PUBLISHED"); r.Code != lua.SendDoneMissing || rdb.ZScore(ctx, s.k.SendDue(), "r2").Err() != redis.Nil || s.counters(t)["send_missing_total"] != "1" {
		t.Fatalf("missing hash = %v", r)
	}
	// A gateway batch: one call for several reservations of the SKU, each
	// answered in its place.
	rdb.HSet(ctx, s.k.Reservation("r3"), "status", "RESERVED", "mq_state", "PENDING")
	rdb.ZAdd(ctx, s.k.SendDue(), redis.Z{Score: float64(now), Member: "r3"})
	res, err := lua.SendDone(ctx, rdb, s.k, lua.SendDoneArgs{Outcome: "PUBLISHED", Items: []lua.SendDoneItem{
		{ReservationID: "r3", RecheckMS: now + 1000}, {ReservationID: "r2", RecheckMS: now + 2000}, {ReservationID: "r1", RecheckMS: now + 3000}}})
	if err != nil || len(res) != 3 || res[0].State != "PUBLISHED" || res[1].Code != lua.SendDoneMissing || res[2].Code != lua.SendDoneSettled ||
		score("r3") != now+1000 || rdb.HGet(ctx, s.k.Reservation("r3"), "mq_state").Val() != "PUBLISHED" {
		t.Fatalf("batch = %+v, %v; r3 score %d", res, err, score("r3"))
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}
