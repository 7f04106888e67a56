package outboxrelay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/outboxrelay"
)

func statuses(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT status, count(*) FROM event_outbox GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	return out
}

// In a broker brownout every send takes its whole timeout. Two relays share
// 14 outbox rows, each claiming 10 at a time under a 1 s lease with a 200 ms
// send timeout: one claim would be 2 s of sends. No row is sent by both at
// once or past its lease and none is reclaimed (seckill_outbox_lease_expired_total stays 0),
// each row's attempt_count is the number of sends made, and once it is over
// every row is SENT. (MaxAttempts is far above what the brownout can use:
// it lasts until the slowest row was tried twice, and on a loaded machine a
// lucky row is tried more often meanwhile; MANUAL would be the test's doing.)
func TestBrownoutSendsEachRowUnderItsLeaseAndCountsRealAttempts(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	ids := insertEvents(t, pool, 14)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("relay-lease-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// A send must end by the end of its row's lease (the same host's clock:
	// PostgreSQL's for the lease, the relay's for the send).
	b := &testenv.Brownout{Next: prod, Check: func(ctx context.Context, m mq.Message, deadline time.Time) string {
		var until *time.Time
		if err := pool.QueryRow(ctx, `SELECT lease_until FROM event_outbox WHERE event_id = $1`, m.ID).Scan(&until); err != nil {
			return "lease_until: " + err.Error()
		}
		if until == nil || deadline.IsZero() || deadline.After(*until) {
			return fmt.Sprintf("send may run until %s, its lease ends at %v", deadline.Format(time.StampMilli), until)
		}
		return ""
	}}
	b.Begin()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var regs []*prometheus.Registry
	for i := range 2 {
		reg := prometheus.NewRegistry()
		regs = append(regs, reg)
		r, err := outboxrelay.New(pool, b, outboxrelay.Options{Topic: testenv.TopicEvents, Owner: fmt.Sprintf("relay-%d", i),
			Batch: 10, Lease: time.Second, Interval: 20 * time.Millisecond, SendTimeout: 200 * time.Millisecond,
			MaxAttempts: 100, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}, reg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()

	// The brownout lasts until every row was tried twice.
	testenv.Await(t, time.Minute, func() bool {
		for _, id := range ids {
			if b.Calls(id.String()) < 2 {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("some row was not tried twice in the brownout: %v", statuses(t, pool))
	})
	b.End()
	testenv.Await(t, time.Minute, func() bool {
		st := statuses(t, pool)
		return st["PENDING"]+st["RETRY"]+st["SENDING"] == 0
	}, func() string { return fmt.Sprintf("rows still unsent after the brownout: %v", statuses(t, pool)) })
	stop()
	wg.Wait()

	if st := statuses(t, pool); st["SENT"] != len(ids) {
		t.Errorf("after the brownout: %v, want all %d SENT", st, len(ids))
	}
	if o := b.Overlaps(); len(o) > 0 {
		t.Errorf("%d sends began while the same event was in flight (claimed twice): %v", len(o), o)
	}
	if v := b.Violations(); len(v) > 0 {
		t.Errorf("%d sends could outlast their row's lease, e.g. %s", len(v), v[0])
	}
	for i, reg := range regs {
		if n := counterOf(t, reg, "seckill_outbox_lease_expired_total"); n != 0 {
			t.Errorf("relay %d reclaimed %v rows whose lease had expired", i, n)
		}
	}
	for _, id := range ids {
		st, attempts, _ := status(t, pool, id)
		if attempts != b.Calls(id.String()) {
			t.Errorf("event %s (%s): attempt_count %d, sends made %d", id, st, attempts, b.Calls(id.String()))
		}
		if b.Sent(id.String()) < 1 {
			t.Errorf("event %s (%s): the broker never took it", id, st)
		}
	}
}

// A relay that claimed rows and died before sending them loses nothing: once
// the lease has run out another relay sends each one; the dead claim counts
// as an attempt (it may have sent), the reclaim is counted.
func TestRowsOfACrashedRelayAreSentAfterItsLease(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	ids := insertEvents(t, pool, 3)
	lease := 2 * time.Second
	// The dead relay's claim, as RelayOnce makes it.
	claimedAt := time.Now()
	if _, err := pool.Exec(ctx, `UPDATE event_outbox SET status = 'SENDING', lease_owner = 'dead-relay',
		lease_until = clock_timestamp() + $1::interval, attempt_count = attempt_count + 1`, lease.String()); err != nil {
		t.Fatal(err)
	}
	broker := &countingBroker{sent: map[string]int{}}
	reg := prometheus.NewRegistry()
	r, err := outboxrelay.New(pool, broker, outboxrelay.Options{Topic: "t", Owner: "survivor", Lease: time.Second,
		SendTimeout: 200 * time.Millisecond}, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.RelayOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(claimedAt) < lease && n != 0 {
		t.Fatalf("a pass within the dead relay's lease took %d of its rows", n)
	}
	testenv.Await(t, 30*time.Second, func() bool {
		if _, err := r.RelayOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return statuses(t, pool)["SENT"] == len(ids)
	}, func() string { return fmt.Sprintf("the dead relay's rows were not sent: %v", statuses(t, pool)) })
	for _, id := range ids {
		if _, attempts, _ := status(t, pool, id); attempts != 2 || broker.count(id.String()) != 1 {
			t.Errorf("event %s: attempt_count %d (want 2: the dead claim and the send), sent %d times (want 1)",
				id, attempts, broker.count(id.String()))
		}
	}
	if got := counterOf(t, reg, "seckill_outbox_lease_expired_total"); got != float64(len(ids)) {
		t.Errorf("reclaims counted %v, want %d", got, len(ids))
	}
}

type countingBroker struct {
	mu   sync.Mutex
	sent map[string]int
}

func (b *countingBroker) Send(_ context.Context, m mq.Message) (mq.SendResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sent[m.ID]++
	return mq.SendResult{MsgID: m.ID}, nil
}

func (b *countingBroker) count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[id]
}

func counterOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
