package outboxrelay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/outboxrelay"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func insertEvents(t *testing.T, pool *pgxpool.Pool, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for range n {
		id := uuid.New()
		if _, err := pool.Exec(context.Background(), `INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
			VALUES ($1, 'ORDER', $2, 'ORDER_CREATED', 1, $3, '{"test":true}')`, id, id, id.String()); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func status(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (st string, attempts int, next time.Time) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT status, attempt_count, next_retry_at FROM event_outbox WHERE event_id = $1`, id).Scan(&st, &attempts, &next); err != nil {
		t.Fatal(err)
	}
	return
}

func TestRelaySendsWithFixedEventIDAndReclaimsExpiredLeases(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("relay-test-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	cons, err := mq.NewConsumer(mq.EndpointOf(cfg), fmt.Sprintf("relay-test-%x", testenv.RandomUint64()), testenv.TopicEvents,
		func(_ context.Context, m mq.Delivered) error {
			mu.Lock()
			seen[m.ID]++
			mu.Unlock()
			return nil
		}, mq.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(); err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	ids := insertEvents(t, pool, 20)
	// One row looks claimed by a relay that died: its lease ran out.
	if _, err := pool.Exec(ctx, `UPDATE event_outbox SET status = 'SENDING', lease_owner = 'dead-relay', lease_until = clock_timestamp() - interval '1 second',
		attempt_count = 1 WHERE event_id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	// Another is claimed by a live relay: not touched.
	live := insertEvents(t, pool, 1)[0]
	pool.Exec(ctx, `UPDATE event_outbox SET status = 'SENDING', lease_owner = 'live-relay', lease_until = clock_timestamp() + interval '1 hour' WHERE event_id = $1`, live)

	r, err := outboxrelay.New(pool, prod, outboxrelay.Options{Topic: testenv.TopicEvents, Owner: "test-relay"}, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.RelayOnce(ctx)
	if err != nil || n != 20 {
		t.Fatalf("relayed %d (%v), want 20 (19 pending + 1 expired lease)", n, err)
	}
	for _, id := range ids {
		if st, _, _ := status(t, pool, id); st != "SENT" {
			t.Fatalf("event %s is %s", id, st)
		}
	}
	if st, _, _ := status(t, pool, live); st != "SENDING" {
		t.Fatalf("live lease was stolen: %s", st)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for _, id := range ids {
			if seen[id.String()] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events never reached the topic", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, _ := r.RelayOnce(ctx); n != 0 {
		t.Fatalf("second pass relayed %d, want 0", n)
	}
}

type failing struct{ err error }

func (f failing) Send(context.Context, mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, f.err
}

func TestRelayBacksOffThenGoesManual(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	id := insertEvents(t, pool, 1)[0]
	r, err := outboxrelay.New(pool, failing{fmt.Errorf("broker said no")}, outboxrelay.Options{Topic: "x", Owner: "t", MaxAttempts: 3,
		BaseBackoff: time.Second, MaxBackoff: time.Minute}, prometheus.NewRegistry(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	var lastNext time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		if n, err := r.RelayOnce(ctx); n != 1 || err != nil {
			t.Fatalf("attempt %d claimed %d (%v)", attempt, n, err)
		}
		st, attempts, next := status(t, pool, id)
		want := "RETRY"
		if attempt == 3 {
			want = "MANUAL"
		}
		if st != want || attempts != attempt {
			t.Fatalf("attempt %d: status %s attempts %d, want %s", attempt, st, attempts, want)
		}
		if attempt > 1 && !next.After(lastNext) {
			t.Fatalf("attempt %d: next_retry_at did not move later", attempt)
		}
		lastNext = next
		// Make it due now instead of sleeping through the backoff.
		pool.Exec(ctx, `UPDATE event_outbox SET next_retry_at = clock_timestamp() WHERE event_id = $1 AND status = 'RETRY'`, id)
	}
	if n, _ := r.RelayOnce(ctx); n != 0 {
		t.Fatal("a MANUAL row was claimed again")
	}
	if got := r.Backoff(1); got != time.Second {
		t.Fatalf("backoff(1) = %v", got)
	}
	if got := r.Backoff(4); got != 8*time.Second {
		t.Fatalf("backoff(4) = %v", got)
	}
	if got := r.Backoff(30); got != time.Minute {
		t.Fatalf("backoff(30) = %v, want the cap", got)
	}
}

// A claim comes in the order its rows fell due, and rows handed back (their
// send not begun) keep their place, ahead of rows that fell due after them.
func TestClaimsComeInDueOrderAndAHandedBackRowKeepsItsPlace(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	events := insertEvents(t, pool, 3)
	for i, id := range events { // due 1 s, 2 s, 3 s ago: the reverse of the order written
		if _, err := pool.Exec(ctx, `UPDATE event_outbox SET next_retry_at = clock_timestamp() - make_interval(secs => $2)
			WHERE event_id = $1`, id, float64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := outbox.Claim(ctx, pool, 2, "r1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].EventID != events[2] || claimed[1].EventID != events[1] {
		t.Fatalf("claimed %d rows, want the two longest due first (%v, %v)", len(claimed), events[2], events[1])
	}
	if n, err := outbox.HandBack(ctx, pool, "r1", []uuid.UUID{claimed[1].EventID}); err != nil || n != 1 {
		t.Fatalf("hand back: %d rows, %v", n, err)
	}
	again, err := outbox.Claim(ctx, pool, 1, "r2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].EventID != events[1] || again[0].Attempts != 1 {
		t.Fatalf("after the hand-back claimed %+v, want %v (due before %v) at attempt 1", again, events[1], events[0])
	}
}
