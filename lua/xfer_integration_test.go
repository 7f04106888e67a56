package lua_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

const xferTTL = time.Hour

// conserved fails t unless k's SKU is conserved over its buckets, with
// in-flight by the counters equal to in-flight by the records, and returns
// the stock read.
func conserved(t *testing.T, rdb redis.Cmdable, k lua.Keys, wantInFlight int64) lua.SKUStock {
	t.Helper()
	s, err := lua.ReadSKUStock(context.Background(), rdb, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(true); err != nil {
		t.Fatalf("conservation: %v", err)
	}
	if s.InFlight != wantInFlight {
		t.Fatalf("in-flight = %d, want %d (%+v)", s.InFlight, wantInFlight, s)
	}
	return s
}

func TestTransferSteps(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.BucketSale(t, rdb, 10, 0, 0)
	from, to := k.InBucket(0), k.InBucket(2)
	take := lua.XferTakeArgs{TransferID: "t1", To: 2, K: 4, NowMS: 1234}
	conserved(t, rdb, k, 0)

	res, err := lua.XferTake(ctx, rdb, from, take)
	if err != nil || res != (lua.XferTakeReply{Code: lua.XferTaken, State: lua.TransferSent, Available: 6}) {
		t.Fatalf("take = %+v, %v", res, err)
	}
	s := conserved(t, rdb, k, 4)
	rec, ok, err := lua.ReadTransfer(ctx, rdb, from, "t1")
	if err != nil || !ok || rec != (lua.TransferRecord{ID: "t1", To: 2, K: 4, State: lua.TransferSent, CreatedMS: 1234}) {
		t.Fatalf("record = %+v %v %v", rec, ok, err)
	}
	if ttl := rdb.PTTL(ctx, from.Transfer("t1")).Val(); ttl != -1 {
		t.Fatalf("a SENT record must not expire: pttl %v", ttl)
	}
	// The same take again (a lost answer): the record's state, nothing moved.
	for range 2 {
		res, err = lua.XferTake(ctx, rdb, from, take)
		if err != nil || res != (lua.XferTakeReply{Code: lua.XferTakeExists, State: lua.TransferSent, Available: 6}) {
			t.Fatalf("take again = %+v, %v", res, err)
		}
	}
	if again := conserved(t, rdb, k, 4); again.Available != s.Available || again.Sent != 1 {
		t.Fatalf("a repeated take changed the stock: %+v then %+v", s, again)
	}
	// The same id with another k is refused.
	if res, err = lua.XferTake(ctx, rdb, from, lua.XferTakeArgs{TransferID: "t1", To: 2, K: 5, NowMS: 1}); err != nil ||
		res.Code != lua.XferTakeConflict {
		t.Fatalf("take with another k = %+v, %v", res, err)
	}

	give := lua.XferGiveArgs{TransferID: "t1", From: 0, K: 4, TTL: xferTTL}
	g, err := lua.XferGive(ctx, rdb, to, give)
	if err != nil || g != (lua.XferGiveReply{Code: lua.XferGiven, Available: 4}) {
		t.Fatalf("give = %+v, %v", g, err)
	}
	conserved(t, rdb, k, 0)
	if ttl := rdb.PTTL(ctx, to.TransferIn("t1")).Val(); ttl <= 0 || ttl > xferTTL {
		t.Fatalf("marker pttl %v, want (0, %v]", ttl, xferTTL)
	}
	// Give twice adds once.
	if g, err = lua.XferGive(ctx, rdb, to, give); err != nil || g != (lua.XferGiveReply{Code: lua.XferAlreadyGiven, Available: 4}) {
		t.Fatalf("give again = %+v, %v", g, err)
	}
	conserved(t, rdb, k, 0)

	cl, err := lua.XferClose(ctx, rdb, from, lua.XferCloseArgs{TransferID: "t1", TTL: xferTTL})
	if err != nil || cl.Code != lua.XferClosed {
		t.Fatalf("close = %+v, %v", cl, err)
	}
	if s = conserved(t, rdb, k, 0); s.Sent != 0 || rdb.ZCard(ctx, from.TransfersOut()).Val() != 0 {
		t.Fatalf("after close: %+v, xfer_out %d", s, rdb.ZCard(ctx, from.TransfersOut()).Val())
	}
	if rec, _, _ = lua.ReadTransfer(ctx, rdb, from, "t1"); rec.State != lua.TransferDone {
		t.Fatalf("record after close = %+v", rec)
	}
	if ttl := rdb.PTTL(ctx, from.Transfer("t1")).Val(); ttl <= 0 {
		t.Fatalf("a DONE record expires: pttl %v", ttl)
	}
	if cl, err = lua.XferClose(ctx, rdb, from, lua.XferCloseArgs{TransferID: "t1", TTL: xferTTL}); err != nil ||
		cl.Code != lua.XferAlreadyClosed {
		t.Fatalf("close again = %+v, %v", cl, err)
	}
	// A take of a closed transfer's id changes nothing either.
	if res, err = lua.XferTake(ctx, rdb, from, take); err != nil || res.Code != lua.XferTakeExists || res.State != lua.TransferDone {
		t.Fatalf("take after close = %+v, %v", res, err)
	}
	if s = conserved(t, rdb, k, 0); s.Buckets[0].Available != 6 || s.Buckets[2].Available != 4 {
		t.Fatalf("final stock %+v", s.Buckets)
	}
}

func TestTransferShortWritesNothing(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.BucketSale(t, rdb, 3, 0)
	before, _ := rdb.HGetAll(ctx, k.Counter()).Result()
	res, err := lua.XferTake(ctx, rdb, k, lua.XferTakeArgs{TransferID: "t1", To: 1, K: 4, NowMS: 1})
	if err != nil || res != (lua.XferTakeReply{Code: lua.XferShort, Available: 3}) {
		t.Fatalf("take = %+v, %v", res, err)
	}
	after, _ := rdb.HGetAll(ctx, k.Counter()).Result()
	if n := rdb.Exists(ctx, k.Transfer("t1"), k.TransfersOut()).Val(); n != 0 || len(after) != len(before) ||
		after["available"] != "3" || after["xfer_out"] != "0" {
		t.Fatalf("SHORT wrote: %d keys, counter %v -> %v", n, before, after)
	}
	conserved(t, rdb, k, 0)
	if _, err := lua.XferTake(ctx, rdb, k, lua.XferTakeArgs{TransferID: "t2", To: 1, K: 0, NowMS: 1}); err == nil {
		t.Fatal("take of 0 units accepted")
	}
}

func TestTransferEdges(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.BucketSale(t, rdb, 3, 0)
	// A give to a bucket without a counter writes nothing (no half counter
	// that sale set-up would then keep).
	ghost := k.InBucket(5)
	g, err := lua.XferGive(ctx, rdb, ghost, lua.XferGiveArgs{TransferID: "t1", From: 0, K: 1, TTL: xferTTL})
	if err != nil || g.Code != lua.XferGiveNoCounter {
		t.Fatalf("give to a missing counter = %+v, %v", g, err)
	}
	if n := rdb.Exists(ctx, ghost.Counter(), ghost.TransferIn("t1")).Val(); n != 0 {
		t.Fatalf("give to a missing counter wrote %d keys", n)
	}
	// Close of an unknown id: MISSING, no error, a stray member removed.
	rdb.ZAdd(ctx, k.TransfersOut(), redis.Z{Score: 1, Member: "stray"})
	cl, err := lua.XferClose(ctx, rdb, k, lua.XferCloseArgs{TransferID: "stray", TTL: xferTTL})
	if err != nil || cl.Code != lua.XferCloseMissing || rdb.ZCard(ctx, k.TransfersOut()).Val() != 0 {
		t.Fatalf("close of a missing record = %+v, %v", cl, err)
	}
	conserved(t, rdb, k, 0)
}

// splitRead runs the next pipeline of two or more commands one command at a
// time and calls between after its first command: a transfer then runs
// between the reads of two buckets, as it can on Redis Cluster, where each
// bucket's master answers on its own.
type splitRead struct{ between func() }

func (h *splitRead) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *splitRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *splitRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		f := h.between
		if f == nil || len(cmds) < 2 {
			return next(ctx, cmds)
		}
		h.between = nil
		err := next(ctx, cmds[:1])
		f()
		return errors.Join(err, next(ctx, cmds[1:]))
	}
}

// A transfer from bucket 0 to bucket 1 runs after bucket 0's counters were
// read and before bucket 1's: the read sees the units in both buckets. The
// in-flight of such a read must not go negative (it did: "in-flight -3 is
// negative" on the cluster, issue 22).
func TestReadSKUStockDuringATransfer(t *testing.T) {
	cfg := testenv.Require(t)
	rdb, other := testenv.Redis(t, cfg), testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.BucketSale(t, other, 10, 0)
	hook := &splitRead{}
	rdb.AddHook(hook)
	for _, c := range []struct {
		name     string
		transfer func(id string)
	}{
		{"taken, given and closed", func(id string) { transfer(t, other, k, id, 0, 1, 3, true, true) }},
		{"taken and given", func(id string) { transfer(t, other, k, id, 0, 1, 3, true, false) }},
		{"taken", func(id string) { transfer(t, other, k, id, 0, 1, 3, false, false) }},
	} {
		id := "torn-" + c.name
		hook.between = func() { c.transfer(id) }
		s, err := lua.ReadSKUStock(ctx, rdb, k)
		if err != nil {
			t.Fatal(err)
		}
		if hook.between != nil {
			t.Fatalf("%s: the read ran no pipeline of two buckets", c.name)
		}
		if err := s.Check(false); err != nil {
			t.Fatalf("%s: a read during the transfer: %v (%+v)", c.name, err, s)
		}
		// Finish it (give and close are idempotent) and read again at rest.
		transfer(t, other, k, id, 0, 1, 3, true, true)
		conserved(t, other, k, 0)
	}
	if s := conserved(t, rdb, k, 0); s.Buckets[0].Available != 1 || s.Buckets[1].Available != 9 {
		t.Fatalf("after three transfers of 3: %+v", s.Buckets)
	}
}

// transfer runs take (and give, and close) of k units of id from bucket
// from to bucket to, failing t unless each step applies.
func transfer(t *testing.T, rdb redis.Cmdable, k lua.Keys, id string, from, to int, n int64, give, closeIt bool) {
	t.Helper()
	ctx := context.Background()
	if r, err := lua.XferTake(ctx, rdb, k.InBucket(from), lua.XferTakeArgs{TransferID: id, To: to, K: n, NowMS: time.Now().UnixMilli()}); err != nil ||
		r.State == "" {
		t.Fatalf("take %s = %+v, %v", id, r, err)
	}
	if give {
		if r, err := lua.XferGive(ctx, rdb, k.InBucket(to), lua.XferGiveArgs{TransferID: id, From: from, K: n, TTL: xferTTL}); err != nil ||
			!r.Code.Applied() {
			t.Fatalf("give %s = %+v, %v", id, r, err)
		}
	}
	if closeIt {
		if r, err := lua.XferClose(ctx, rdb, k.InBucket(from), lua.XferCloseArgs{TransferID: id, TTL: xferTTL}); err != nil ||
			r.State != lua.TransferDone {
			t.Fatalf("close %s = %+v, %v", id, r, err)
		}
	}
}

// loseGive undoes transfer id's give in bucket to, as a receiving master that
// lost its last second of writes after the giving bucket's close committed:
// the marker and the counters' k are gone (the give's writes are one script,
// so a master keeps all of them or none).
func loseGive(t *testing.T, rdb redis.Cmdable, k lua.Keys, id string, to int, n int64) {
	t.Helper()
	ctx := context.Background()
	kb := k.InBucket(to)
	if rdb.Del(ctx, kb.TransferIn(id)).Val() != 1 {
		t.Fatalf("no marker of %s in bucket %d to lose", id, to)
	}
	rdb.HIncrBy(ctx, kb.Counter(), "available", -n)
	rdb.HIncrBy(ctx, kb.Counter(), "xfer_in", -n)
}

// Close lists the transfer in xfer_closed (once), and a closed transfer
// whose target lost its give is read as Unmarked, with its units in flight
// by the counters and by no SENT record.
func TestClosedTransferListedAndLostGiveUnmarked(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.BucketSale(t, rdb, 10, 0)
	transfer(t, rdb, k, "c1", 0, 1, 3, true, true)
	transfer(t, rdb, k, "c1", 0, 1, 3, true, true) // a repeat changes nothing
	if z := rdb.ZRangeWithScores(ctx, k.TransfersClosed(), 0, -1).Val(); len(z) != 1 || z[0].Member != "c1" {
		t.Fatalf("xfer_closed = %v", z)
	}
	if s := conserved(t, rdb, k, 0); len(s.Unmarked) != 0 {
		t.Fatalf("unmarked with every marker there: %+v", s.Unmarked)
	}
	loseGive(t, rdb, k, "c1", 1, 3)
	s, err := lua.ReadSKUStock(ctx, rdb, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unmarked) != 1 || s.Unmarked[0].From != 0 || s.Unmarked[0].ID != "c1" || s.Unmarked[0].To != 1 ||
		s.Unmarked[0].K != 3 || s.InFlight != 3 || s.InFlightRecords != 0 {
		t.Fatalf("after the lost give: %+v", s)
	}
	if err := s.Check(false); err != nil {
		t.Fatalf("a lost give is conserved by the counters: %v", err)
	}
	if err := s.Check(true); err == nil {
		t.Fatal("a lost give passed the quiescent check")
	}
	// A transfer taken long before another's close is trimmed from the list.
	old := lua.XferTakeArgs{TransferID: "c0", To: 1, K: 1, NowMS: time.Now().Add(-2 * xferTTL).UnixMilli()}
	if r, err := lua.XferTake(ctx, rdb, k, old); err != nil || r.Code != lua.XferTaken {
		t.Fatalf("take = %+v, %v", r, err)
	}
	if r, err := lua.XferClose(ctx, rdb, k, lua.XferCloseArgs{TransferID: "c0", TTL: xferTTL}); err != nil || r.Code != lua.XferClosed {
		t.Fatalf("close = %+v, %v", r, err)
	}
	transfer(t, rdb, k, "c2", 0, 1, 1, true, true)
	if ids := rdb.ZRange(ctx, k.TransfersClosed(), 0, -1).Val(); len(ids) != 2 || ids[0] != "c1" || ids[1] != "c2" {
		t.Fatalf("xfer_closed after a close of a younger transfer = %v", ids)
	}
}
