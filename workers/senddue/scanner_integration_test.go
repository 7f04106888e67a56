package senddue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// recorder is a broker that accepts every send and records its message id.
type recorder struct {
	mu   sync.Mutex
	sent map[string]int
}

func (b *recorder) Send(_ context.Context, m mq.Message) (mq.SendResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent[m.ID]++
	return mq.SendResult{MsgID: m.ID}, nil
}

func (b *recorder) count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[id]
}

// initSKU sets up a running SKU in Redis (as sale set-up does) and deletes
// its activity's keys when t ends.
func initSKU(t *testing.T, rdb redis.UniversalClient, k lua.Keys) {
	t.Helper()
	now := time.Now()
	if _, err := lua.InitSKU(context.Background(), rdb, k, lua.InitSKUArgs{Initial: 10, Available: 10,
		StartMS: now.Add(-time.Minute).UnixMilli(), EndMS: now.Add(time.Hour).UnixMilli(),
		OrderDeadline: 300 * time.Second, PaymentTimeout: time.Minute, Unmoved: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteActivity(rdb, k.ActivityID) })
}

// One SKU whose send_due answers WRONGTYPE (as a SKU on a Redis shard that
// is down answers with an error) does not stall the scan: every other SKU of
// the same sale and of another sale is re-sent in the same pass, the failing
// SKU is counted per SKU and named in the pass's error, and the next pass
// counts it again.
func TestOneFailingSKUDoesNotStallTheScan(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	d := testenv.Deriver(t, cfg)
	saleA, saleB := testenv.ActivityID(), testenv.ActivityID()
	bad := lua.Keys{ActivityID: saleA, SKUID: 2}
	good := []lua.Keys{{ActivityID: saleA, SKUID: 1}, {ActivityID: saleA, SKUID: 3}, {ActivityID: saleA, SKUID: 4},
		{ActivityID: saleB, SKUID: 1}, {ActivityID: saleB, SKUID: 2}}
	set := fmt.Sprintf("seckill:test:active_skus:senddue:%d", saleA)
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	// Six SKUs in the set, the failing one among them (SMEMBERS' order is Redis's).
	var msgIDs []string
	for i, k := range append([]lua.Keys{bad}, good...) {
		initSKU(t, rdb, k)
		m := testenv.MustReserve(t, rdb, d, k, int64(100+i))
		if i > 0 {
			msgIDs = append(msgIDs, m.MessageID.String())
		}
		if err := rdb.SAdd(ctx, set, k.Member()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The failing SKU's send_due becomes a string: every command on it answers WRONGTYPE.
	if err := rdb.Set(ctx, bad.SendDue(), "not a sorted set", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	broker := &recorder{sent: map[string]int{}}
	m := metrics.NewReservation(prometheus.NewRegistry())
	s, err := New(rdb, broker, Options{Topic: "t", Lease: time.Minute, SendTimeout: 5 * time.Second, ActiveSKUs: set}, m,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// Every reservation is due (sent 3 s after admission): a clock a minute ahead.
	s.now = func() time.Time { return time.Now().Add(time.Minute) }

	n, err := s.ScanOnce(ctx)
	if n != len(good) {
		t.Errorf("one scan handled %d items, want %d (one per good SKU); error %v", n, len(good), err)
	}
	for i, id := range msgIDs {
		if broker.count(id) != 1 {
			t.Errorf("the reservation of %s was sent %d times, want once", good[i].Member(), broker.count(id))
		}
	}
	for _, k := range good {
		if due := rdb.ZCount(ctx, k.SendDue(), "-inf", fmt.Sprint(time.Now().UnixMilli())).Val(); due != 0 {
			t.Errorf("%s: %d items still due after the scan", k.Member(), due)
		}
	}
	var perr *skuloop.Error
	if !errors.As(err, &perr) || !skuloop.Only(err) || len(perr.Failures) != 1 ||
		perr.Failures[0].ActivityID != bad.ActivityID || perr.Failures[0].SKUID != bad.SKUID ||
		!strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("scan error = %v, want one SKU failure of %s (WRONGTYPE)", err, bad.Member())
	}
	if got := testutil.ToFloat64(m.SendDueSKUFailures.Counter(bad.ActivityID, bad.SKUID)); got != 1 {
		t.Errorf("failures counted for %s: %v, want 1", bad.Member(), got)
	}
	if got := testutil.ToFloat64(m.SendDueSKUFailures.Counter(good[0].ActivityID, good[0].SKUID)); got != 0 {
		t.Errorf("failures counted for the good %s: %v, want 0", good[0].Member(), got)
	}
	// The next pass: nothing is due elsewhere, the failing SKU fails and is counted again.
	if n, err := s.ScanOnce(ctx); n != 0 || !skuloop.Only(err) {
		t.Fatalf("second scan = %d, %v", n, err)
	}
	if got := testutil.ToFloat64(m.SendDueSKUFailures.Counter(bad.ActivityID, bad.SKUID)); got != 2 {
		t.Errorf("failures counted for %s after two scans: %v, want 2", bad.Member(), got)
	}
}

// endSKU moves k's sale end an hour back (set-up run again with a new
// window; its counters are kept).
func endSKU(t *testing.T, rdb redis.UniversalClient, k lua.Keys) {
	t.Helper()
	now := time.Now()
	if _, err := lua.InitSKU(context.Background(), rdb, k, lua.InitSKUArgs{Initial: 10, Available: 10,
		StartMS: now.Add(-2 * time.Hour).UnixMilli(), EndMS: now.Add(-time.Hour).UnixMilli(),
		OrderDeadline: 300 * time.Second, PaymentTimeout: time.Minute, Unmoved: true}); err != nil {
		t.Fatal(err)
	}
}

// The scanner takes a finished bucket out of the set it walks, once per
// PruneEvery: an ended sale with nothing owed goes, an ended sale whose
// reservation still waits for its message and a live sale stay, and the
// reservation is still re-sent.
func TestScannerPrunesFinishedSales(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	a := testenv.ActivityID()
	done, owing, live, later := lua.Keys{ActivityID: a, SKUID: 1}, lua.Keys{ActivityID: a, SKUID: 2},
		lua.Keys{ActivityID: a, SKUID: 3}, lua.Keys{ActivityID: a, SKUID: 4}
	set := fmt.Sprintf("seckill:test:active_skus:prune:%d", a)
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	for _, k := range []lua.Keys{done, owing, live, later} {
		initSKU(t, rdb, k)
		rdb.SAdd(ctx, set, k.Member())
	}
	msg := testenv.MustReserve(t, rdb, testenv.Deriver(t, cfg), owing, 7)
	endSKU(t, rdb, done)
	endSKU(t, rdb, owing)
	broker := &recorder{sent: map[string]int{}}
	m := metrics.NewReservation(prometheus.NewRegistry())
	s, err := New(rdb, broker, Options{Topic: "t", Lease: time.Minute, SendTimeout: 5 * time.Second, ActiveSKUs: set,
		PruneGrace: time.Millisecond, PruneEvery: 10 * time.Minute}, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now().Add(time.Minute) // the reservation is due
	s.now = func() time.Time { return clock }
	if _, err := s.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	members := func() string { v := rdb.SMembers(ctx, set).Val(); slices.Sort(v); return strings.Join(v, " ") }
	if got, want := members(), owing.Member()+" "+live.Member()+" "+later.Member(); got != want {
		t.Errorf("after the first scan the set holds %q, want %q", got, want)
	}
	if broker.count(msg.MessageID.String()) != 1 {
		t.Errorf("the owing sale's reservation was sent %d times, want once", broker.count(msg.MessageID.String()))
	}
	if got := testutil.ToFloat64(m.ActiveSKUsPruned); got != 1 {
		t.Errorf("pruned counter %v, want 1", got)
	}
	// A sale that ends now is pruned only once PruneEvery has passed.
	endSKU(t, rdb, later)
	clock = clock.Add(time.Minute)
	if _, err := s.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if !rdb.SIsMember(ctx, set, later.Member()).Val() {
		t.Error("pruned again within PruneEvery")
	}
	clock = clock.Add(10 * time.Minute)
	if _, err := s.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if rdb.SIsMember(ctx, set, later.Member()).Val() || !rdb.SIsMember(ctx, set, live.Member()).Val() {
		t.Errorf("after PruneEvery the set holds %q, want the live and owing sales only", members())
	}
}
