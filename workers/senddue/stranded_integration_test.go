package senddue

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
)

// A broker group leaves the topic's route: every published reservation
// still waiting for its recheck (its business deadline minutes ahead) is
// sent again at once, exactly once more, with its own message_id; a route
// that only gains a group changes nothing.
func TestABrokerGroupLeavingTheRouteResendsWhatWaits(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k, set, msgs := leaseSale(t, rdb, 12)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("senddue-stranded-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	pub := &testenv.Brownout{Next: prod}
	var phase, polls atomic.Int32 // phase 0: a and b; 1: a, b and c; 2: b and c
	brokers := func(context.Context) (map[string]bool, error) {
		polls.Add(1)
		switch phase.Load() {
		case 0:
			return map[string]bool{"broker-a": true, "broker-b": true}, nil
		case 1:
			return map[string]bool{"broker-a": true, "broker-b": true, "broker-c": true}, nil
		default:
			return map[string]bool{"broker-b": true, "broker-c": true}, nil
		}
	}
	m := metrics.NewReservation(prometheus.NewRegistry())
	s, err := New(rdb, pub, Options{Topic: testenv.TopicEvents, Interval: 20 * time.Millisecond, Lease: time.Second,
		SendTimeout: time.Second, ActiveSKUs: set, Brokers: brokers, RouteEvery: 20 * time.Millisecond}, m,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()

	sentEach := func(n int) func() bool {
		return func() bool {
			for rid, mid := range msgs {
				if pub.Sent(mid) != n || rdb.HGet(ctx, k.Reservation(rid), "mq_state").Val() != reservation.OutcomePublished {
					return false
				}
			}
			return true
		}
	}
	testenv.Await(t, 30*time.Second, sentEach(1), func() string { return "not every reservation published once" })
	phase.Store(1)
	from := polls.Load()
	testenv.Await(t, 10*time.Second, func() bool { return polls.Load() >= from+10 }, func() string { return "the route was not polled" })
	if !sentEach(1)() || testutil.ToFloat64(m.SendStranded) != 0 {
		t.Fatalf("a group joining the route re-sent something (stranded %v)", testutil.ToFloat64(m.SendStranded))
	}
	phase.Store(2)
	testenv.Await(t, 30*time.Second, sentEach(2), func() string { return "not every reservation sent again once after broker-a left" })
	if got := testutil.ToFloat64(m.SendStranded); got != float64(len(msgs)) {
		t.Errorf("seckill_reservation_send_stranded_total = %v, want %d", got, len(msgs))
	}
	if got := testutil.ToFloat64(m.SendRecheck); got != 0 {
		t.Errorf("the stranded resends counted as %v rechecks past the deadline", got)
	}
	if o := pub.Overlaps(); len(o) > 0 {
		t.Errorf("sent twice at once: %v", o)
	}
}
