package reservation_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workers/senddue"
)

type rig struct {
	cfg  config.Config
	rdb  redis.UniversalClient
	prod *mq.Producer
	fp   *failpoint.Set
	res  *reservation.Reserver
	k    lua.Keys
	m    *metrics.Reservation
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newRig sets up a live SKU with stock in Redis and a Reserver on the real
// Redis and RocketMQ of the stack.
func newRig(t *testing.T, stock int, tune ...func(*reservation.Options)) *rig {
	t.Helper()
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("seckill-test-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	keys, err := cfg.IDKeys()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ids.NewDeriver(keys, cfg.IDKeyVersion)
	if err != nil {
		t.Fatal(err)
	}
	k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 7}
	now := time.Now()
	ctx := context.Background()
	if _, err := lua.InitSKU(ctx, rdb, k, lua.InitSKUArgs{Initial: int64(stock), Available: int64(stock),
		StartMS: now.Add(-time.Minute).UnixMilli(), EndMS: now.Add(time.Hour).UnixMilli(),
		OrderDeadline: 300 * time.Second, PaymentTimeout: time.Minute, Unmoved: true}); err != nil {
		t.Fatal(err)
	}
	member := fmt.Sprintf("%d:%d", k.ActivityID, k.SKUID)
	rdb.SAdd(ctx, lua.ActiveSKUs, member)
	t.Cleanup(func() {
		rdb.SRem(ctx, lua.ActiveSKUs, member)
		testenv.DeleteSKUKeys(ctx, rdb, k)
	})
	m := metrics.NewReservation(prometheus.NewRegistry())
	fp := &failpoint.Set{}
	opt := reservation.Options{
		Topic: cfg.TopicOrderCreate, SendTimeout: 3 * time.Second, SendDueDelay: 2 * time.Second,
		ReservationTTL: time.Hour, SoldOutMemo: 200 * time.Millisecond,
	}
	for _, f := range tune {
		f(&opt)
	}
	if opt.Scripts == autoPipelined {
		ap, err := redisx.PipelinedScripts(rdb)
		if err != nil {
			t.Fatal(err)
		}
		opt.Scripts = ap
	}
	r, err := reservation.NewReserver(rdb, d, prod, opt, m, fp, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return &rig{cfg: cfg, rdb: rdb, prod: prod, fp: fp, res: r, k: k, m: m}
}

// autoPipelined, as Options.Scripts of newRig, stands for
// redisx.PipelinedScripts on the rig's client (what the gateway runs
// reserve.lua on).
var autoPipelined redis.Scripter = &redis.Client{}

// scriptRunners are the two ways the gateway can run reserve.lua: one EVALSHA
// round trip per call, or concurrent calls in shared pipelines.
var scriptRunners = []struct {
	name      string
	pipelined bool
	tune      func(*reservation.Options)
}{
	{"direct", false, func(*reservation.Options) {}},
	{"auto-pipelined", true, func(o *reservation.Options) { o.Scripts = autoPipelined }},
}

func (r *rig) counters(t *testing.T) (initial, avail, open, committed int) {
	t.Helper()
	v, err := r.rdb.HMGet(context.Background(), r.k.Counter(), "initial", "available", "open_reserved", "committed").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := func(x any) int {
		var i int
		fmt.Sscan(fmt.Sprint(x), &i)
		return i
	}
	return n(v[0]), n(v[1]), n(v[2]), n(v[3])
}

// dueNow counts the send_due items due now: a published reservation stays in
// send_due (until its order or compensation settles it) but is not due again
// before its business deadline.
func (r *rig) dueNow(t *testing.T) int64 {
	t.Helper()
	n, err := r.rdb.ZCount(context.Background(), r.k.SendDue(), "-inf", fmt.Sprint(time.Now().UnixMilli())).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *rig) scanner(t *testing.T) *senddue.Scanner {
	t.Helper()
	s, err := senddue.New(r.rdb, r.prod, senddue.Options{Topic: r.cfg.TopicOrderCreate, Lease: 5 * time.Second,
		SendTimeout: 3 * time.Second, Concurrency: 16}, r.m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// collector consumes the order-create topic with a fresh group and records
// every message_id it sees with its delivery count.
type collector struct {
	mu   sync.Mutex
	seen map[string]int
}

func collect(t *testing.T, cfg config.Config) *collector {
	t.Helper()
	c := &collector{seen: map[string]int{}}
	cons, err := mq.NewConsumer(mq.EndpointOf(cfg), fmt.Sprintf("seckill-test-collect-%x", testenv.RandomUint64()),
		cfg.TopicOrderCreate, func(_ context.Context, m mq.Delivered) error {
			c.mu.Lock()
			c.seen[m.ID]++
			c.mu.Unlock()
			return nil
		}, mq.ConsumerOptions{Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *collector) has(ids []string) (missing int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if c.seen[id] == 0 {
			missing++
		}
	}
	return missing
}

func TestOneUserThousandRequestsOneReservation(t *testing.T) {
	for _, sr := range scriptRunners {
		t.Run(sr.name, func(t *testing.T) { oneUserThousandRequests(t, sr.tune) })
	}
}

func oneUserThousandRequests(t *testing.T, tune func(*reservation.Options)) {
	r := newRig(t, 100, tune)
	var wg sync.WaitGroup
	results := make([]reservation.Result, 1000)
	errs := make([]error, 1000)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = r.res.Reserve(context.Background(), 42, r.k.ActivityID, r.k.SKUID, uuid.New())
		}()
	}
	wg.Wait()
	queued, already := 0, 0
	var rid uuid.UUID
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch res.Code {
		case reservation.Queued:
			queued++
			rid = res.ReservationID
		case reservation.AlreadyReserved:
			already++
		default:
			t.Fatalf("request %d: unexpected %v", i, res.Code)
		}
	}
	if queued != 1 || already != 999 {
		t.Fatalf("queued %d, already reserved %d; want 1 and 999", queued, already)
	}
	for _, res := range results {
		if res.Code == reservation.AlreadyReserved && res.ReservationID != rid {
			t.Fatalf("already-reserved names %v, want the one reservation %v", res.ReservationID, rid)
		}
	}
	if initial, avail, open, committed := r.counters(t); avail != 99 || open != 1 || initial != avail+open+committed {
		t.Fatalf("counters initial %d available %d open %d committed %d", initial, avail, open, committed)
	}
}

func TestBurstExactlyNReservationsAndOneMessageEach(t *testing.T) {
	for _, sr := range scriptRunners {
		t.Run(sr.name, func(t *testing.T) { burstExactlyN(t, sr.pipelined, sr.tune) })
	}
}

func burstExactlyN(t *testing.T, pipelined bool, tune func(*reservation.Options)) {
	const stock, buyers = 50, 2000
	r := newRig(t, stock, tune)
	pc := &pipelineCounter{}
	r.rdb.AddHook(pc)
	col := collect(t, r.cfg)
	var mu sync.Mutex
	var rids []uuid.UUID
	soldOut := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200)
	for u := range buyers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := r.res.Reserve(context.Background(), int64(1000+u), r.k.ActivityID, r.k.SKUID, uuid.New())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch res.Code {
			case reservation.Queued:
				rids = append(rids, res.ReservationID)
			case reservation.SoldOut:
				soldOut++
			default:
				t.Errorf("user %d: %v", u, res.Code)
			}
		}()
	}
	wg.Wait()
	// Auto-pipelined, the burst's calls shared round trips: 200 at once fill
	// pipelines of tens (150 here). Direct, the largest pipeline is a send
	// outcomes' record, a few commands.
	if pipelined && pc.largest.Load() < 16 {
		t.Errorf("auto-pipelined: the largest pipeline held %d commands, want 16 or more", pc.largest.Load())
	}
	if len(rids) != stock || soldOut != buyers-stock {
		t.Fatalf("reservations %d sold out %d; want %d and %d", len(rids), soldOut, stock, buyers-stock)
	}
	if initial, avail, open, committed := r.counters(t); initial != stock || avail != 0 || open != stock || initial != avail+open+committed {
		t.Fatalf("counters initial %d available %d open %d committed %d", initial, avail, open, committed)
	}
	// Every reservation's fixed message_id reaches the topic; the scanner
	// finishes whatever the gateway did not confirm.
	ctx := context.Background()
	var msgIDs []string
	for _, rid := range rids {
		msgIDs = append(msgIDs, r.rdb.HGet(ctx, r.k.Reservation(rid.String()), "message_id").Val())
	}
	scan := r.scanner(t)
	waitFor(t, 60*time.Second, "every message on the topic and nothing due to send", func() bool {
		if _, err := scan.ScanOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return col.has(msgIDs) == 0 && r.dueNow(t) == 0
	})
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, id := range msgIDs {
		if col.seen[id] < 1 {
			t.Errorf("message %s never arrived", id)
		}
	}
}

func TestCrashAfterReserveScannerResendsSameMessageID(t *testing.T) {
	r := newRig(t, 5)
	col := collect(t, r.cfg)
	ctx := context.Background()
	testenv.RequireFailpoints(t)
	r.fp.Arm(failpoint.AfterRedisReserve, 1)
	req := uuid.New()
	_, err := r.res.Reserve(ctx, 77, r.k.ActivityID, r.k.SKUID, req)
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("reserve with failpoint = %v", err)
	}
	// The crash left the reservation in Redis, unsent, due for the scanner.
	d := derive(t, r.cfg)
	want, _ := d.ForRequest(0, r.k.ActivityID, r.k.SKUID, 77, req)
	h := r.rdb.HGetAll(ctx, r.k.Reservation(want.ReservationID.String())).Val()
	if h["mq_state"] != "PENDING" || h["message_id"] != want.MessageID.String() {
		t.Fatalf("reservation after crash = %v", h)
	}
	if col.has([]string{want.MessageID.String()}) != 1 {
		t.Fatal("message sent despite the crash")
	}
	// Not yet due: the scanner leaves it alone.
	scan := r.scanner(t)
	if n, _ := scan.ScanOnce(ctx); n != 0 {
		t.Fatalf("scanner re-sent %d items before they were due", n)
	}
	// Make it due now (as time passing would) and let the scanner run.
	r.rdb.ZAdd(ctx, r.k.SendDue(), redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: want.ReservationID.String()})
	if n, err := scan.ScanOnce(ctx); n != 1 || err != nil {
		t.Fatalf("scanner handled %d items (%v), want 1", n, err)
	}
	waitFor(t, 30*time.Second, "re-sent message on the topic", func() bool { return col.has([]string{want.MessageID.String()}) == 0 })
	h = r.rdb.HGetAll(ctx, r.k.Reservation(want.ReservationID.String())).Val()
	if h["mq_state"] != "PUBLISHED" || r.dueNow(t) != 0 {
		t.Fatalf("after re-send: reservation %v, %d due in send_due", h, r.dueNow(t))
	}
	// The client's retry of the same request gets the same reservation.
	res, err := r.res.Reserve(ctx, 77, r.k.ActivityID, r.k.SKUID, req)
	if err != nil || res.Code != reservation.Queued || !res.Duplicate || res.ReservationID != want.ReservationID {
		t.Fatalf("retry after crash = %+v, %v", res, err)
	}
}

func TestLeaseOfACrashedScannerExpires(t *testing.T) {
	r := newRig(t, 5)
	ctx := context.Background()
	testenv.RequireFailpoints(t)
	r.fp.Arm(failpoint.AfterRedisReserve, 1)
	if _, err := r.res.Reserve(ctx, 5, r.k.ActivityID, r.k.SKUID, uuid.New()); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatal(err)
	}
	// A scanner claims the item and dies before sending: the claim pushed the
	// score to the lease end, the item is still in send_due.
	claimAt := time.Now().Add(10 * time.Second)   // late enough for the item to be due
	leaseEnd := time.Now().Add(-time.Millisecond) // a lease that has already run out
	claimed, err := lua.SendClaim(ctx, r.rdb, r.k, lua.SendClaimArgs{NowMS: claimAt.UnixMilli(),
		LeaseUntilMS: leaseEnd.UnixMilli(), Max: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if r.rdb.ZScore(ctx, r.k.SendDue(), claimed[0].ReservationID).Val() != float64(leaseEnd.UnixMilli()) {
		t.Fatal("claimed item left send_due or its score is not the lease end")
	}
	// Its lease (here already over) lets another scanner take it over.
	if n, err := r.scanner(t).ScanOnce(ctx); n != 1 || err != nil {
		t.Fatalf("second scanner handled %d (%v), want the abandoned item", n, err)
	}
	if r.dueNow(t) != 0 {
		t.Fatal("item still due after the take-over sent it")
	}
}

func TestSameRequestAfterRequestMapLost(t *testing.T) {
	r := newRig(t, 5)
	ctx := context.Background()
	req := uuid.New()
	first, err := r.res.Reserve(ctx, 9, r.k.ActivityID, r.k.SKUID, req)
	if err != nil || first.Code != reservation.Queued {
		t.Fatal(first, err)
	}
	r.rdb.Del(ctx, r.k.Request(9, req.String()))
	again, err := r.res.Reserve(ctx, 9, r.k.ActivityID, r.k.SKUID, req)
	if err != nil || again.Code != reservation.Queued || again.ReservationID != first.ReservationID || !again.Duplicate {
		t.Fatalf("after request map loss = %+v (%v), want duplicate of %v", again, err, first.ReservationID)
	}
	// Even with the reservation hash and the user guard gone too, the derived id is the same.
	r.rdb.Del(ctx, r.k.Request(9, req.String()), r.k.Reservation(first.ReservationID.String()), r.k.User(9))
	d := derive(t, r.cfg)
	id, _ := d.ForRequest(0, r.k.ActivityID, r.k.SKUID, 9, req)
	if id.ReservationID != first.ReservationID {
		t.Fatalf("derived %v, first answer was %v", id.ReservationID, first.ReservationID)
	}
	if _, avail, open, _ := r.counters(t); avail != 4 || open != 1 {
		t.Fatalf("duplicate requests moved stock: available %d open %d", avail, open)
	}
}

func TestSoldOutMemoAnswersWithoutScriptButKeepsIdempotency(t *testing.T) {
	r := newRig(t, 1)
	ctx := context.Background()
	req := uuid.New()
	winner, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, req)
	if err != nil || winner.Code != reservation.Queued {
		t.Fatal(winner, err)
	}
	if res, _ := r.res.Reserve(ctx, 2, r.k.ActivityID, r.k.SKUID, uuid.New()); res.Code != reservation.SoldOut {
		t.Fatalf("second buyer = %v", res.Code)
	}
	before := testutil.ToFloat64(r.m.SoldOutMemo)
	for u := 3; u < 13; u++ {
		if res, _ := r.res.Reserve(ctx, int64(u), r.k.ActivityID, r.k.SKUID, uuid.New()); res.Code != reservation.SoldOut {
			t.Fatalf("buyer %d = %v", u, res.Code)
		}
	}
	if got := testutil.ToFloat64(r.m.SoldOutMemo) - before; got != 10 {
		t.Fatalf("memo answered %v of 10 sold-out requests", got)
	}
	// The winner's retry still gets its reservation, not SOLD_OUT.
	res, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, req)
	if err != nil || res.Code != reservation.Queued || res.ReservationID != winner.ReservationID {
		t.Fatalf("winner's retry during memo = %+v, %v", res, err)
	}
}

func derive(t *testing.T, cfg config.Config) *ids.Deriver {
	t.Helper()
	keys, _ := cfg.IDKeys()
	d, err := ids.NewDeriver(keys, cfg.IDKeyVersion)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The sold-out memo answers without the script, but never differently from
// it for the same Idempotency-Key: a request first refused ALREADY_RESERVED
// (the user holds another reservation) is refused so again, and an admitted
// one is QUEUED again, while a new buyer gets SOLD_OUT.
func TestSoldOutMemoGivesTheSameKeyTheSameAnswer(t *testing.T) {
	r := newRig(t, 1, func(o *reservation.Options) { o.SoldOutMemo = time.Minute })
	ctx := context.Background()
	first, second := uuid.New(), uuid.New()
	admitted, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, first)
	if err != nil || admitted.Code != reservation.Queued {
		t.Fatalf("first = %+v, %v", admitted, err)
	}
	again, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, second)
	if err != nil || again.Code != reservation.AlreadyReserved {
		t.Fatalf("the same user's second key = %+v, %v; want ALREADY_RESERVED", again, err)
	}
	if res, err := r.res.Reserve(ctx, 2, r.k.ActivityID, r.k.SKUID, uuid.New()); err != nil || res.Code != reservation.SoldOut {
		t.Fatalf("another buyer = %+v, %v; want SOLD_OUT (and the memo set)", res, err)
	}
	memo := testutil.ToFloat64(r.m.SoldOutMemo)
	if res, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, second); err != nil || res.Code != reservation.AlreadyReserved ||
		res.ReservationID != admitted.ReservationID {
		t.Fatalf("retry of the ALREADY_RESERVED key under the memo = %+v, %v", res, err)
	}
	if res, err := r.res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, first); err != nil || res.Code != reservation.Queued || !res.Duplicate {
		t.Fatalf("retry of the admitted key under the memo = %+v, %v", res, err)
	}
	if res, err := r.res.Reserve(ctx, 3, r.k.ActivityID, r.k.SKUID, uuid.New()); err != nil || res.Code != reservation.SoldOut {
		t.Fatalf("a new buyer under the memo = %+v, %v", res, err)
	}
	if testutil.ToFloat64(r.m.SoldOutMemo) != memo+1 {
		t.Fatalf("memo answers %v → %v, want only the new buyer's from the memo", memo, testutil.ToFloat64(r.m.SoldOutMemo))
	}
}

// commandCounter counts the commands a client sends (pipelines included).
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// pipelineCounter keeps the largest pipeline a client sent.
type pipelineCounter struct{ largest atomic.Int64 }

func (c *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (c *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for n := int64(len(cmds)); ; {
			old := c.largest.Load()
			if n <= old || c.largest.CompareAndSwap(old, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// Once the gateway holds a copy of a sold-out SKU's holders, it gives the
// script's answers without a Redis command: the admitted request QUEUED
// again, a holder's other request ALREADY_RESERVED, anyone else SOLD_OUT.
// A unit given back and taken again changes the holders' version: the next
// SOLD_OUT makes the gateway copy them again, with the new holder.
//
// The Reserver reads a clock the test moves, so the memo ends when the test
// says so, not when a slow run (-race, a cluster) happens to pass 2 s.
func TestSoldOutAnswersFromTheHoldersCopyWithoutRedis(t *testing.T) {
	const memo = 2 * time.Second
	r := newRig(t, 2, func(o *reservation.Options) { o.SoldOutMemo = memo })
	base := time.Now()
	var offset atomic.Int64
	reservation.SetClock(r.res, func() time.Time { return base.Add(time.Duration(offset.Load())) })
	cc := &commandCounter{}
	r.rdb.AddHook(cc)
	ctx := context.Background()
	reserve := func(user int64, req uuid.UUID) (reservation.Result, int64) {
		t.Helper()
		n0 := cc.n.Load()
		res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, req)
		if err != nil {
			t.Fatal(err)
		}
		return res, cc.n.Load() - n0
	}
	// await calls reserve until it answers code with no command to Redis.
	await := func(user int64, req uuid.UUID, code reservation.Code) reservation.Result {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			if res, n := reserve(user, req); res.Code == code && n == 0 {
				return res
			}
		}
		t.Fatalf("user %d: no %s answered from memory within 10 s", user, code)
		return reservation.Result{}
	}
	req1, req2 := uuid.New(), uuid.New()
	a1, _ := reserve(1, req1)
	a2, _ := reserve(2, req2)
	if a1.Code != reservation.Queued || a2.Code != reservation.Queued {
		t.Fatalf("admissions %v %v", a1, a2)
	}
	if res, n := reserve(3, uuid.New()); res.Code != reservation.SoldOut || n == 0 {
		t.Fatalf("first sold-out request = %v with %d commands, want the script's SOLD_OUT", res.Code, n)
	}
	await(4, uuid.New(), reservation.SoldOut)
	for _, c := range []struct {
		user int64
		req  uuid.UUID
		code reservation.Code
		rid  uuid.UUID
	}{
		{1, req1, reservation.Queued, a1.ReservationID},
		{1, uuid.New(), reservation.AlreadyReserved, a1.ReservationID},
		{2, uuid.New(), reservation.AlreadyReserved, a2.ReservationID},
		{5, uuid.New(), reservation.SoldOut, uuid.Nil},
	} {
		if res, n := reserve(c.user, c.req); res.Code != c.code || res.ReservationID != c.rid || n != 0 {
			t.Errorf("user %d = %+v with %d Redis commands, want %s %s with none", c.user, res, n, c.code, c.rid)
		}
	}
	// A unit comes back (a release); within the memo the gateway still says
	// SOLD_OUT from memory; after it, user 6 takes the unit.
	r.rdb.HIncrBy(ctx, r.k.Counter(), "available", 1)
	if res, n := reserve(8, uuid.New()); res.Code != reservation.SoldOut || n != 0 {
		t.Fatalf("inside the memo = %v with %d commands, want SOLD_OUT from memory", res.Code, n)
	}
	offset.Add(int64(memo + time.Millisecond))
	req6 := uuid.New()
	a6, _ := reserve(6, req6)
	if a6.Code != reservation.Queued {
		t.Fatalf("user 6 after the unit came back = %v", a6)
	}
	if res, n := reserve(7, uuid.New()); res.Code != reservation.SoldOut || n == 0 {
		t.Fatalf("sold out again = %v with %d commands, want the script's SOLD_OUT", res.Code, n)
	}
	if res := await(6, req6, reservation.Queued); res.ReservationID != a6.ReservationID || !res.Duplicate {
		t.Fatalf("user 6's retry from the new copy = %+v", res)
	}
}
