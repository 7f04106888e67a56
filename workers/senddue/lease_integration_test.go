package senddue

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// leaseSale sets up a running SKU of n units with one reservation per user
// 1..n, all due now, in a send_due that only this test's scanners scan. It
// returns the SKU's keys, the scanned set and each reservation's message.
func leaseSale(t *testing.T, rdb redis.UniversalClient, n int) (lua.Keys, string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 1}
	now := time.Now()
	if _, err := lua.InitSKU(ctx, rdb, k, lua.InitSKUArgs{Initial: int64(n), Available: int64(n),
		StartMS: now.Add(-time.Minute).UnixMilli(), EndMS: now.Add(time.Hour).UnixMilli(),
		OrderDeadline: 300 * time.Second, PaymentTimeout: time.Minute, Unmoved: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteActivity(rdb, k.ActivityID) })
	set := fmt.Sprintf("seckill:test:active_skus:senddue-lease:%d", k.ActivityID)
	t.Cleanup(func() { rdb.Del(context.Background(), set) })
	d := testenv.Deriver(t, testenv.Require(t))
	msgs := map[string]string{} // reservation id -> message id
	for u := 1; u <= n; u++ {
		m := testenv.MustReserve(t, rdb, d, k, int64(u))
		rid := m.ReservationID.String()
		msgs[rid] = m.MessageID.String()
		// Due now (the gateway would have sent it; say it could not).
		if err := rdb.ZAddXX(ctx, k.SendDue(), redis.Z{Score: float64(now.UnixMilli()), Member: rid}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.SAdd(ctx, set, k.Member()).Err(); err != nil {
		t.Fatal(err)
	}
	return k, set, msgs
}

// In a broker brownout every send takes its whole timeout. Two scanners
// share one SKU of 40 due reservations, each allowed 4 sends at once under a
// 1 s lease with a 200 ms send timeout: one claim of the whole SKU would be
// 2 s of work. No reservation is sent by both at once or past its lease
// (send_due's score when the send begins is the lease's end), its
// send_attempts counts exactly the sends made, and once the brownout is
// over every reservation is published.
func TestBrownoutNeverWorksAClaimPastItsLease(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k, set, msgs := leaseSale(t, rdb, 40)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("senddue-lease-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	b := &testenv.Brownout{Next: prod, Check: func(ctx context.Context, m mq.Message, deadline time.Time) string {
		score, err := rdb.ZScore(ctx, k.SendDue(), m.Key).Result()
		if err != nil {
			return "send_due score: " + err.Error()
		}
		if deadline.IsZero() || deadline.UnixMilli() > int64(score) {
			return fmt.Sprintf("send may run until %d ms, its lease ends at %d ms", deadline.UnixMilli(), int64(score))
		}
		return ""
	}}
	b.Begin()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		s, err := New(rdb, b, Options{Topic: testenv.TopicEvents, Interval: 20 * time.Millisecond, Lease: time.Second,
			SendTimeout: 200 * time.Millisecond, Concurrency: 4, BaseBackoff: 50 * time.Millisecond,
			MaxBackoff: 200 * time.Millisecond, ActiveSKUs: set}, metrics.NewReservation(prometheus.NewRegistry()), quiet)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = s.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()

	// The brownout lasts until every reservation was tried twice.
	testenv.Await(t, time.Minute, func() bool {
		for _, mid := range msgs {
			if b.Calls(mid) < 2 {
				return false
			}
		}
		return true
	}, func() string { return "some reservation was not tried twice in the brownout" })
	b.End()
	unpublished := func() []string {
		var out []string
		for rid := range msgs {
			if st := rdb.HGet(ctx, k.Reservation(rid), "mq_state").Val(); st != reservation.OutcomePublished {
				out = append(out, rid+"="+st)
			}
		}
		return out
	}
	testenv.Await(t, time.Minute, func() bool { return len(unpublished()) == 0 },
		func() string { return fmt.Sprintf("not published after the brownout: %v", unpublished()) })
	stop()
	wg.Wait()

	if o := b.Overlaps(); len(o) > 0 {
		t.Errorf("%d sends began while the same message was in flight (claimed twice): %v", len(o), o)
	}
	if v := b.Violations(); len(v) > 0 {
		t.Errorf("%d sends could outlast their item's lease, e.g. %s", len(v), v[0])
	}
	for rid, mid := range msgs {
		attempts, err := rdb.HGet(ctx, k.Reservation(rid), "send_attempts").Int()
		if err != nil {
			t.Fatal(err)
		}
		if attempts != b.Calls(mid) {
			t.Errorf("reservation %s: send_attempts %d, sends made %d", rid, attempts, b.Calls(mid))
		}
		if b.Sent(mid) < 1 {
			t.Errorf("reservation %s: the broker never took its message", rid)
		}
	}
}

// A scanner that claimed items and died before sending them loses nothing:
// once the claim's lease has run out another scanner sends each one, and
// the dead claim is no attempt (send_attempts 1, one send).
func TestAClaimOfACrashedScannerIsSentAfterItsLease(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k, set, msgs := leaseSale(t, rdb, 3)
	lease := 2 * time.Second
	claimedAt := time.Now()
	claimed, err := lua.SendClaim(ctx, rdb, k, lua.SendClaimArgs{NowMS: claimedAt.UnixMilli(),
		LeaseUntilMS: claimedAt.Add(lease).UnixMilli(), Max: 10})
	if err != nil || len(claimed) != len(msgs) {
		t.Fatalf("the dead scanner's claim = %v, %v; want all %d", claimed, err, len(msgs))
	}
	broker := &recorder{sent: map[string]int{}}
	s, err := New(rdb, broker, Options{Topic: "t", Lease: time.Second, SendTimeout: 200 * time.Millisecond, ActiveSKUs: set},
		metrics.NewReservation(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.ScanOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(claimedAt) < lease && n != 0 {
		t.Fatalf("a scan within the dead scanner's lease took %d of its items", n)
	}
	testenv.Await(t, 30*time.Second, func() bool {
		if _, err := s.ScanOnce(ctx); err != nil {
			t.Fatal(err)
		}
		for rid := range msgs {
			if rdb.HGet(ctx, k.Reservation(rid), "mq_state").Val() != reservation.OutcomePublished {
				return false
			}
		}
		return true
	}, func() string { return "the dead scanner's items were not sent after its lease" })
	for rid, mid := range msgs {
		if got := broker.count(mid); got != 1 {
			t.Errorf("reservation %s sent %d times, want once", rid, got)
		}
		if got, _ := rdb.HGet(ctx, k.Reservation(rid), "send_attempts").Int(); got != 1 {
			t.Errorf("reservation %s: send_attempts %d, want 1", rid, got)
		}
	}
}
