package sagastarter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/temporalx"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

func message() events.OrderCreateRequested {
	rid := uuid.New()
	at := time.Now().UTC().Truncate(time.Millisecond)
	return events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested, MessageID: uuid.New(),
		MessageKey: rid.String(), RequestID: uuid.New(), ReservationID: rid, ActivityID: testenv.ActivityID(), SKUID: 1,
		UserID: 42, KeyVersion: 1, ReservedAt: at, BusinessDeadline: at.Add(5 * time.Minute)}
}

func delivery(t *testing.T, m events.OrderCreateRequested) mq.Delivered {
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return mq.Delivered{Topic: "seckill_order_create", ID: m.MessageID.String(), Key: m.ReservationID.String(), Body: body,
		BrokerMsgID: uuid.NewString()}
}

// The same message delivered 10,000 times concurrently to the consumer's
// handler starts exactly one saga and records one inbox row. No worker polls
// the test's task queue, so the saga stays open for inspection.
func TestTenThousandDeliveriesStartOneSaga(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	tc, err := temporalx.Dial(ctx, cfg.TemporalAddress, cfg.TemporalNamespace, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	reg := prometheus.NewRegistry()
	queue := fmt.Sprintf("starter-test-%x", testenv.RandomUint64())
	st, err := sagastarter.New(pool, tc, queue, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := message()
	d := delivery(t, m)
	const n = 10000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	var errs []error
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := st.Handle(ctx, d); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d deliveries asked for redelivery, first: %v", len(errs), errs[0])
	}
	var inbox int
	pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = $1 AND message_id = $2`, sagastarter.ConsumerGroup, m.MessageID).Scan(&inbox)
	if inbox != 1 {
		t.Fatalf("starter inbox rows = %d", inbox)
	}
	wid := workflows.ReservationWorkflowID(m.ReservationID.String())
	desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatalf("saga not started: %v", err)
	}
	if desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("saga status %v", desc.WorkflowExecutionInfo.Status)
	}
	if started := consumed(t, reg, "started"); started != 1 {
		t.Fatalf("started counter = %v, want 1", started)
	}
	if dup := consumed(t, reg, "duplicate"); dup != n-1 {
		t.Fatalf("duplicate counter = %v, want %d", dup, n-1)
	}
	if err := tc.TerminateWorkflow(ctx, wid, "", "test done"); err != nil {
		t.Fatal(err)
	}
	// A late duplicate after the saga closed does not start a new one.
	if err := st.Handle(ctx, d); err != nil {
		t.Fatalf("duplicate after close: %v", err)
	}
	desc, _ = tc.DescribeWorkflowExecution(ctx, wid, "")
	if desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		t.Fatalf("a closed saga was restarted: %v", desc.WorkflowExecutionInfo.Status)
	}
}

func TestMalformedAndConflictingMessagesAreQuarantined(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	tc, err := temporalx.Dial(ctx, cfg.TemporalAddress, cfg.TemporalNamespace, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	reg := prometheus.NewRegistry()
	st, _ := sagastarter.New(pool, tc, fmt.Sprintf("starter-test-%x", testenv.RandomUint64()), reg, slog.New(slog.NewTextHandler(io.Discard, nil)))

	bad := []mq.Delivered{
		{Topic: "t", ID: "x", BrokerMsgID: "b1", Body: []byte("{not json")},
		{Topic: "t", ID: "y", BrokerMsgID: "b2", Body: []byte(`{"schema_version": 99}`)},
	}
	m := message()
	wrongID := delivery(t, m)
	wrongID.ID, wrongID.BrokerMsgID = uuid.NewString(), "b3"
	bad = append(bad, wrongID)
	for _, d := range bad {
		if err := st.Handle(ctx, d); err != nil {
			t.Fatalf("malformed message not acknowledged: %v", err)
		}
	}
	// Same message_id, different payload: the second is quarantined.
	good := delivery(t, m)
	if err := st.Handle(ctx, good); err != nil {
		t.Fatal(err)
	}
	forged := m
	forged.UserID = 7
	fd := delivery(t, forged)
	if err := st.Handle(ctx, fd); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT reason FROM message_quarantine ORDER BY quarantine_id`)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for rows.Next() {
		var r string
		rows.Scan(&r)
		reasons = append(reasons, r)
	}
	if len(reasons) != 4 {
		t.Fatalf("quarantined %d messages (%v), want 4", len(reasons), reasons)
	}
	if got := consumed(t, reg, "quarantined"); got != 4 {
		t.Fatalf("quarantined counter = %v", got)
	}
	tc.TerminateWorkflow(ctx, workflows.ReservationWorkflowID(m.ReservationID.String()), "", "test done")
}

// consumed reads seckill_order_consume_total{result} from reg.
func consumed(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_order_consume_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
