package deadletter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/deadletter"
)

// testGroup is the failing consumer group of this test; its dead-letter topic
// %DLQ%saga-starter-dlqtest is created by scripts/stack.sh.
const testGroup = "saga-starter-dlqtest"

// quarantined is one message_quarantine row.
type quarantined struct {
	Group, Topic, MessageID, BrokerMsgID, Reason, Source string
	ReconsumeTimes                                       *int
	PayloadHash, Body                                    []byte
	ReplayedAt                                           *time.Time
	ReplayCount                                          int
}

func rowsOf(t *testing.T, pool *pgxpool.Pool, messageID string) []quarantined {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT consumer_group, topic, message_id, broker_msg_id, reason, source, reconsume_times, payload_hash, body, replayed_at, replay_count
		FROM message_quarantine WHERE message_id = $1 ORDER BY quarantine_id`, messageID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (quarantined, error) {
		var q quarantined
		return q, r.Scan(&q.Group, &q.Topic, &q.MessageID, &q.BrokerMsgID, &q.Reason, &q.Source, &q.ReconsumeTimes,
			&q.PayloadHash, &q.Body, &q.ReplayedAt, &q.ReplayCount)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A message whose consumer always fails goes, after the group's redeliveries,
// to the broker's %DLQ%<group>; the dead-letter consumer copies it into
// message_quarantine; Replay sends it back to its original topic once per
// message_id, and a second Replay sends nothing.
func TestDeadLetteredMessageIsQuarantinedAndReplayedOnce(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	topic := testenv.TopicDeadLetterTest

	// One reservation's ORDER_CREATE_REQUESTED, sent twice as the gateway and
	// the send-due scanner would (same message_id, retry_count differs).
	f := reservation.Fields{ReservationID: uuid.New(), MessageID: uuid.New(), RequestID: uuid.New(), ActivityID: testenv.ActivityID(),
		SKUID: 1, UserID: 42, SchemaVersion: ids.SchemaVersion, KeyVersion: 1, ReservedAtMS: time.Now().UnixMilli(),
		DeadlineMS: time.Now().Add(5 * time.Minute).UnixMilli()}
	mid, rid := f.MessageID.String(), f.ReservationID.String()
	var bodies [][]byte
	for attempt := range 2 {
		f.SendAttempts = attempt
		b, err := json.Marshal(f.Message())
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}

	// The failing group: fails this test's message on every delivery and
	// acknowledges everything else on the shared test topic.
	var mu sync.Mutex
	deliveries := map[string][]int{} // broker msg id -> reconsume times seen
	failing, err := mq.NewConsumer(mq.EndpointOf(cfg), testGroup, topic, func(_ context.Context, d mq.Delivered) error {
		if d.ID != mid {
			return nil
		}
		mu.Lock()
		deliveries[d.BrokerMsgID] = append(deliveries[d.BrokerMsgID], d.ReconsumeTimes)
		mu.Unlock()
		return errors.New("test: this consumer always fails")
	}, mq.ConsumerOptions{Concurrency: 4, MaxReconsume: 1, RetryDelayLevel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := failing.Start(); err != nil {
		t.Fatalf("start the failing consumer: %v", err)
	}
	defer failing.Close()

	reg := prometheus.NewRegistry()
	dl, err := deadletter.New(pool, deadletter.Options{Broker: mq.EndpointOf(cfg), Group: testGroup, DefaultTopic: topic,
		RetryEvery: time.Second}, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- dl.Run(runCtx) }()
	defer func() {
		stopRun()
		if err := <-runDone; err != nil {
			t.Errorf("dead-letter consumer Run: %v", err)
		}
	}()

	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("dlqtest-%x", testenv.RandomUint64()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	sent := map[string][]byte{} // broker msg id -> body
	for _, b := range bodies {
		res, err := prod.Send(ctx, mq.Message{Topic: topic, Key: rid, ID: mid, Tag: "ORDER_CREATE_REQUESTED", Body: b})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		sent[res.MsgID] = b
	}

	// Both copies reach message_quarantine through the broker's DLQ.
	var rows []quarantined
	awaitUntil(t, ctx, 90*time.Second, func() bool {
		rows = rowsOf(t, pool, mid)
		return len(rows) >= 2
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d of 2 copies quarantined; the failing consumer saw %v", len(rows), deliveries)
	})
	if len(rows) != 2 {
		t.Fatalf("quarantined %d rows of message %s, want 2 (one per copy): %+v", len(rows), mid, rows)
	}
	for _, q := range rows {
		t.Logf("quarantined %s: topic %s, reconsume_times %d, reason %q", q.BrokerMsgID, q.Topic, *q.ReconsumeTimes, q.Reason)
		body, ok := sent[q.BrokerMsgID]
		switch {
		case !ok:
			t.Errorf("row broker_msg_id %s is none of the sent %v", q.BrokerMsgID, keys(sent))
		case q.Source != deadletter.SourceDLQ:
			t.Errorf("row %s: source %q, want DLQ", q.BrokerMsgID, q.Source)
		case q.Topic != topic:
			t.Errorf("row %s: topic %q, want the original %s", q.BrokerMsgID, q.Topic, topic)
		case q.Group != testGroup:
			t.Errorf("row %s: consumer_group %q, want the original %s", q.BrokerMsgID, q.Group, testGroup)
		// The broker's count of failed deliveries: the first and the one redelivery MaxReconsume 1 allows.
		case q.ReconsumeTimes == nil || *q.ReconsumeTimes != 2:
			t.Errorf("row %s: reconsume_times %v, want 2", q.BrokerMsgID, q.ReconsumeTimes)
		case q.Reason != "DLQ: redelivered 1 times without success":
			t.Errorf("row %s: reason %q", q.BrokerMsgID, q.Reason)
		case !bytes.Equal(q.Body, body):
			t.Errorf("row %s: body %s, want %s", q.BrokerMsgID, q.Body, body)
		case !bytes.Equal(q.PayloadHash, sha256Of(body)):
			t.Errorf("row %s: payload_hash is not the SHA-256 of the body", q.BrokerMsgID)
		case q.ReplayedAt != nil || q.ReplayCount != 0:
			t.Errorf("row %s: replayed before any replay (%v, %d)", q.BrokerMsgID, q.ReplayedAt, q.ReplayCount)
		}
	}
	mu.Lock()
	t.Logf("deliveries to the failing group (reconsume times by copy): %v", deliveries)
	for id, times := range deliveries {
		if len(times) < 2 {
			t.Errorf("copy %s was delivered %v times before the DLQ, want a first delivery and a redelivery", id, times)
		}
	}
	mu.Unlock()
	// (More only if the DLQ held letters of an earlier, interrupted run.)
	if got := counter(t, reg, "seckill_message_dead_lettered_total"); got < 2 {
		t.Errorf("seckill_message_dead_lettered_total = %v, want at least our 2", got)
	}
	// The replayed message must not be dead-lettered again by the failing group.
	if err := failing.Close(); err != nil {
		t.Fatal(err)
	}

	// A dry run reports the message and changes nothing.
	dry, err := deadletter.Replay(ctx, pool, prod, deadletter.ReplayOptions{Group: testGroup, DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if it, ok := itemOf(dry, mid); !ok || it.Outcome != deadletter.WouldReplay || it.Copies != 2 || it.Topic != topic || it.Key != rid {
		t.Fatalf("dry run item of %s = %+v (found %v), want WOULD_REPLAY of 2 copies to %s with key %s", mid, it, ok, topic, rid)
	}
	for _, q := range rowsOf(t, pool, mid) {
		if q.ReplayedAt != nil || q.ReplayCount != 0 {
			t.Fatalf("dry run changed row %s: %v, %d", q.BrokerMsgID, q.ReplayedAt, q.ReplayCount)
		}
	}

	// A fresh group on the original topic sees what Replay sends.
	replayed := make(chan mq.Delivered, 16)
	verify, err := mq.NewConsumer(mq.EndpointOf(cfg), fmt.Sprintf("dlqtest-verify-%x", testenv.RandomUint64()), topic,
		func(_ context.Context, d mq.Delivered) error {
			if d.ID == mid {
				replayed <- d
			}
			return nil
		}, mq.ConsumerOptions{Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := verify.Start(); err != nil {
		t.Fatal(err)
	}
	defer verify.Close()

	rep, err := deadletter.Replay(ctx, pool, prod, deadletter.ReplayOptions{Group: testGroup})
	if err != nil {
		t.Fatalf("replay: %v (report %+v)", err, rep)
	}
	it, ok := itemOf(rep, mid)
	if !ok || it.Outcome != deadletter.Replayed || it.Copies != 2 || it.ReplayCount != 1 || it.BrokerMsgID == "" {
		t.Fatalf("replay item of %s = %+v (found %v), want REPLAYED once for 2 copies", mid, it, ok)
	}
	t.Logf("replay: %+v", rep)
	if _, dup := sent[it.BrokerMsgID]; dup {
		t.Fatalf("replay reported broker id %s of an original send", it.BrokerMsgID)
	}
	for _, q := range rowsOf(t, pool, mid) {
		if q.ReplayedAt == nil || q.ReplayCount != 1 {
			t.Errorf("row %s after replay: replayed_at %v, replay_count %d, want set and 1", q.BrokerMsgID, q.ReplayedAt, q.ReplayCount)
		}
	}
	// The fresh group also reads the two original sends (it starts at the
	// first stored message); the replay is the copy with the reported broker id.
	seen := map[string]bool{}
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for !seen[it.BrokerMsgID] {
		select {
		case d := <-replayed:
			if seen[d.BrokerMsgID] {
				continue // at-least-once
			}
			seen[d.BrokerMsgID] = true
			if d.BrokerMsgID != it.BrokerMsgID {
				continue
			}
			// The body of one copy, byte for byte (which one: the first quarantined).
			if d.Topic != topic || d.Key != rid || d.Tag != "ORDER_CREATE_REQUESTED" ||
				!(bytes.Equal(d.Body, bodies[0]) || bytes.Equal(d.Body, bodies[1])) {
				t.Fatalf("replayed message: topic %s key %s tag %s body %s; want %s, %s, ORDER_CREATE_REQUESTED and a sent body",
					d.Topic, d.Key, d.Tag, d.Body, topic, rid)
			}
		case <-deadline.C:
			t.Fatalf("replayed copy %s not consumed from %s within 60s (saw %v)", it.BrokerMsgID, topic, seen)
		}
	}

	// Idempotent: a second run sends nothing and leaves the rows as they are.
	again, err := deadletter.Replay(ctx, pool, prod, deadletter.ReplayOptions{Group: testGroup})
	if err != nil {
		t.Fatalf("second replay: %v", err)
	}
	if it, ok := itemOf(again, mid); ok || again.Failed != 0 {
		t.Fatalf("second replay = %+v (our item %+v), want nothing sent for %s", again, it, mid)
	}
	for _, q := range rowsOf(t, pool, mid) {
		if q.ReplayCount != 1 {
			t.Errorf("row %s after the second replay: replay_count %d, want 1", q.BrokerMsgID, q.ReplayCount)
		}
	}
}

// awaitUntil polls cond every 200 ms until it holds, failing the test with
// what() after timeout.
func awaitUntil(t *testing.T, ctx context.Context, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("not within %s: %s", timeout, what())
		}
	}
}

func itemOf(rep deadletter.Report, messageID string) (deadletter.ReplayItem, bool) {
	for _, it := range rep.Items {
		if it.MessageID == messageID {
			return it, true
		}
	}
	return deadletter.ReplayItem{}, false
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

func sha256Of(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

func keys(m map[string][]byte) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}

// lockedBuffer is an io.Writer safe for the consumer's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// While the dead-letter topic has no route the consumer cannot start: Run
// logs it, tries again every RetryEvery and returns nil when ctx ends.
func TestRunRetriesWhileTheTopicHasNoRoute(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	var logs lockedBuffer
	group := fmt.Sprintf("dlqtest-no-topic-%x", testenv.RandomUint64()) // %DLQ%<group> does not exist
	dl, err := deadletter.New(pool, deadletter.Options{Broker: mq.EndpointOf(cfg), Group: group,
		DefaultTopic: testenv.TopicOrderCreate, RetryEvery: 100 * time.Millisecond}, prometheus.NewRegistry(),
		slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dl.Run(ctx) }()
	awaitUntil(t, context.Background(), 30*time.Second, func() bool {
		return logs.count(`"msg":"mq.dead_letter_consumer_start_failed"`) >= 2
	}, func() string { return "fewer than 2 start attempts logged" })
	logs.mu.Lock()
	first, _, _ := strings.Cut(logs.buf.String(), "\n")
	logs.mu.Unlock()
	t.Logf("first attempt: %s", first)
	if n := logs.count(`"msg":"mq.dead_letter_consumer_started"`); n != 0 {
		t.Fatalf("consumer of a topic without route reported started (%d times)", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
	}
}
