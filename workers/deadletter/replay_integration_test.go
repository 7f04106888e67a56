package deadletter_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/deadletter"
)

// deadLetters records two dead-lettered copies of one ORDER_CREATE_REQUESTED
// (the gateway's send and the scanner's re-send) for group, as the
// dead-letter consumer would, and returns its message_id.
func deadLetters(t *testing.T, pool *pgxpool.Pool, group string) string {
	t.Helper()
	f := reservation.Fields{ReservationID: uuid.New(), MessageID: uuid.New(), RequestID: uuid.New(), ActivityID: testenv.ActivityID(),
		SKUID: 1, UserID: 7, SchemaVersion: ids.SchemaVersion, KeyVersion: 1, ReservedAtMS: time.Now().UnixMilli(),
		DeadlineMS: time.Now().Add(5 * time.Minute).UnixMilli()}
	for attempt := range 2 {
		f.SendAttempts = attempt
		body, err := json.Marshal(f.Message())
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(body)
		if _, err := pool.Exec(context.Background(), `
			INSERT INTO message_quarantine (consumer_group, topic, message_id, broker_msg_id, reason, payload_hash, body, source, reconsume_times)
			VALUES ($1, $2, $3, $4, 'DLQ: redelivered 16 times without success', $5, $6, $7, 17)`,
			group, testenv.TopicEvents, f.MessageID.String(), uuid.NewString(), h[:], body, deadletter.SourceDLQ); err != nil {
			t.Fatal(err)
		}
	}
	return f.MessageID.String()
}

// gated is a real publisher whose sends wait for release (closed by the
// test) and, once the broker took the message, call after.
type gated struct {
	next    reservation.Publisher
	started chan string
	release chan struct{}
	after   func()

	mu   sync.Mutex
	sent []string // message ids the broker took
}

func (g *gated) Send(ctx context.Context, m mq.Message) (mq.SendResult, error) {
	if g.started != nil {
		g.started <- m.ID
	}
	if g.release != nil {
		select {
		case <-g.release:
		case <-ctx.Done():
			return mq.SendResult{}, ctx.Err()
		}
	}
	res, err := g.next.Send(ctx, m)
	if err == nil {
		g.mu.Lock()
		g.sent = append(g.sent, m.ID)
		g.mu.Unlock()
		if g.after != nil {
			g.after()
		}
	}
	return res, err
}

func (g *gated) sends() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

// While a replay's send is in flight, its dead-letter rows are not locked:
// another transaction takes them FOR UPDATE NOWAIT, and a second replay run
// is not blocked and sends nothing. The first run then marks both copies
// replayed once, having sent one message.
func TestReplayHoldsNoRowLockAcrossTheSend(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := fmt.Sprintf("dlqtest-replay-%x", testenv.RandomUint64())
	mid := deadLetters(t, pool, group)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("dlqtest-replay-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	slow := &gated{next: prod, started: make(chan string, 1), release: make(chan struct{})}
	type result struct {
		rep deadletter.Report
		err error
	}
	first := make(chan result, 1)
	go func() {
		rep, err := deadletter.Replay(ctx, pool, slow, deadletter.ReplayOptions{Group: group})
		first <- result{rep, err}
	}()
	released := false
	defer func() {
		if !released {
			close(slow.release)
		}
	}()
	select {
	case <-slow.started:
	case <-ctx.Done():
		t.Fatal("the replay never began its send")
	}

	// The send is in flight: the rows are free for anyone else.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var locked int
	err = tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT quarantine_id FROM message_quarantine
		WHERE consumer_group = $1 AND message_id = $2 FOR UPDATE NOWAIT) l`, group, mid).Scan(&locked)
	_ = tx.Rollback(ctx)
	if err != nil || locked != 2 {
		t.Fatalf("locking the rows while the replay sends: %d rows, %v; want both, not blocked", locked, err)
	}
	other := &gated{next: prod}
	rep, err := deadletter.Replay(ctx, pool, other, deadletter.ReplayOptions{Group: group})
	if err != nil {
		t.Fatalf("a second replay during the first one's send: %v", err)
	}
	if it, ok := itemOf(rep, mid); !ok || it.Outcome != deadletter.Skipped || len(other.sends()) != 0 {
		t.Fatalf("second replay's item %+v (found %v), sends %v; want SKIPPED, nothing sent", it, ok, other.sends())
	}

	close(slow.release)
	released = true
	res := <-first
	if res.err != nil {
		t.Fatalf("first replay: %v (%+v)", res.err, res.rep)
	}
	if it, ok := itemOf(res.rep, mid); !ok || it.Outcome != deadletter.Replayed || it.Copies != 2 || it.ReplayCount != 1 {
		t.Fatalf("first replay's item %+v (found %v), want REPLAYED once for 2 copies", it, ok)
	}
	if s := slow.sends(); len(s) != 1 || s[0] != mid {
		t.Fatalf("sent %v, want %s once", s, mid)
	}
	assertReplayed(t, pool, mid, 1)
}

// A replay that dies between the broker's acceptance and recording it
// loses nothing and applies nothing twice: its rows stay unreplayed, so the
// next run sends the message again under the same message_id (the starter
// dedupes by it) and records one replay; a run after that sends nothing.
func TestReplayLostBetweenSendAndRecordIsReplayedOnceMore(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	group := fmt.Sprintf("dlqtest-replay-%x", testenv.RandomUint64())
	mid := deadLetters(t, pool, group)
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("dlqtest-replay-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	// The run "dies" right after the broker took the message: its context
	// ends before anything is recorded.
	dying, die := context.WithCancel(ctx)
	defer die()
	crash := &gated{next: prod, after: die}
	rep, err := deadletter.Replay(dying, pool, crash, deadletter.ReplayOptions{Group: group})
	if !errors.Is(err, deadletter.ErrReplayFailed) {
		t.Fatalf("the dying run = %+v, %v; want a failed replay", rep, err)
	}
	if s := crash.sends(); len(s) != 1 || s[0] != mid {
		t.Fatalf("the dying run sent %v, want %s once", s, mid)
	}
	assertReplayed(t, pool, mid, 0)

	again := &gated{next: prod}
	rep, err = deadletter.Replay(ctx, pool, again, deadletter.ReplayOptions{Group: group})
	if err != nil {
		t.Fatalf("the next run: %v", err)
	}
	if it, ok := itemOf(rep, mid); !ok || it.Outcome != deadletter.Replayed || it.ReplayCount != 1 {
		t.Fatalf("the next run's item %+v (found %v), want REPLAYED, replay 1", it, ok)
	}
	if s := again.sends(); len(s) != 1 || s[0] != mid {
		t.Fatalf("the next run sent %v, want %s once (the same message_id)", s, mid)
	}
	assertReplayed(t, pool, mid, 1)
	last := &gated{next: prod}
	if rep, err := deadletter.Replay(ctx, pool, last, deadletter.ReplayOptions{Group: group}); err != nil || len(rep.Items) != 0 || len(last.sends()) != 0 {
		t.Fatalf("a run after the replay = %+v, %v, sent %v; want nothing", rep, err, last.sends())
	}
	assertReplayed(t, pool, mid, 1)
}

// assertReplayed checks that every row of mid has replay_count n, and is
// marked replayed exactly when n > 0.
func assertReplayed(t *testing.T, pool *pgxpool.Pool, mid string, n int) {
	t.Helper()
	rows := rowsOf(t, pool, mid)
	if len(rows) != 2 {
		t.Fatalf("%d rows of %s, want 2", len(rows), mid)
	}
	for _, q := range rows {
		if q.ReplayCount != n || (q.ReplayedAt != nil) != (n > 0) {
			t.Errorf("row %s: replay_count %d, replayed_at %v; want %d", q.BrokerMsgID, q.ReplayCount, q.ReplayedAt, n)
		}
	}
}
