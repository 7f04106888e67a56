package sagastarter_test

import (
	"context"
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
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// message is an ORDER_CREATE_REQUESTED with the ids the gateway derives for it under d.
func message(t *testing.T, d *ids.Deriver) events.OrderCreateRequested {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Millisecond)
	m := events.OrderCreateRequested{SchemaVersion: 1, EventType: events.TypeOrderCreateRequested, RequestID: uuid.New(),
		ActivityID: testenv.ActivityID(), SKUID: 1, UserID: 42, ReservedAt: at, BusinessDeadline: at.Add(5 * time.Minute)}
	r, err := d.ForRequest(0, m.ActivityID, m.SKUID, m.UserID, m.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	m.KeyVersion, m.ReservationID, m.MessageID, m.MessageKey = r.KeyVersion, r.ReservationID, r.MessageID, r.ReservationID.String()
	return m
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
	tc, err := temporalx.Dial(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	reg := prometheus.NewRegistry()
	queue := fmt.Sprintf("starter-test-%x", testenv.RandomUint64())
	st, err := sagastarter.New(pool, tc, queue, testenv.Deriver(t, cfg), reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := message(t, testenv.Deriver(t, cfg))
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
	tc, err := temporalx.Dial(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	reg := prometheus.NewRegistry()
	st, _ := sagastarter.New(pool, tc, fmt.Sprintf("starter-test-%x", testenv.RandomUint64()), testenv.Deriver(t, cfg), reg, slog.New(slog.NewTextHandler(io.Discard, nil)))

	bad := []mq.Delivered{
		{Topic: "t", ID: "x", BrokerMsgID: "b1", Body: []byte("{not json")},
		{Topic: "t", ID: "y", BrokerMsgID: "b2", Body: []byte(`{"schema_version": 99}`)},
	}
	m := message(t, testenv.Deriver(t, cfg))
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
	conflict := m
	conflict.BusinessDeadline = m.BusinessDeadline.Add(time.Hour) // not part of the ids: they still derive
	cd := delivery(t, conflict)
	if err := st.Handle(ctx, cd); err != nil {
		t.Fatal(err)
	}
	// Forged: another user's reservation under m's ids, and ids nobody derived.
	forged := m
	forged.UserID = 7
	random := message(t, testenv.Deriver(t, cfg))
	random.ReservationID, random.MessageID = uuid.New(), uuid.New()
	random.MessageKey = random.ReservationID.String()
	for _, f := range []events.OrderCreateRequested{forged, random} {
		if err := st.Handle(ctx, delivery(t, f)); err != nil {
			t.Fatal(err)
		}
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
	if len(reasons) != 6 {
		t.Fatalf("quarantined %d messages (%v), want 6", len(reasons), reasons)
	}
	for i, want := range map[int]string{3: "PAYLOAD_CONFLICT", 4: "FORGED_MESSAGE", 5: "FORGED_MESSAGE"} {
		if !strings.HasPrefix(reasons[i], want) {
			t.Errorf("quarantine reason %d = %q, want %s", i, reasons[i], want)
		}
	}
	if got := consumed(t, reg, "quarantined"); got != 6 {
		t.Fatalf("quarantined counter = %v", got)
	}
	if got, err := testutil.GatherAndCount(reg, "seckill_message_forged_total"); err != nil || got != 1 {
		t.Fatalf("seckill_message_forged_total series: %d (%v)", got, err)
	}
	if got := gathered(t, reg, "seckill_message_forged_total"); got != 2 {
		t.Fatalf("seckill_message_forged_total = %v, want 2", got)
	}
	// Neither forged message started a saga or wrote an inbox row.
	var inboxRows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, random.MessageID).Scan(&inboxRows); err != nil || inboxRows != 0 {
		t.Fatalf("forged message has %d inbox rows (%v)", inboxRows, err)
	}
	if _, err := tc.DescribeWorkflowExecution(ctx, workflows.ReservationWorkflowID(random.ReservationID.String()), ""); err == nil {
		t.Fatal("a forged message started a saga")
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

// gathered reads the unlabelled counter name from reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// failingStart is a Temporal client whose ExecuteWorkflow fails: Temporal did
// not accept the start.
type failingStart struct {
	client.Client
}

var errStartRefused = errors.New("test: temporal refused the start")

func (failingStart) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, errStartRefused
}

// A start Temporal did not accept is not recorded as SAGA_STARTED: the
// delivery asks for redelivery and the inbox row stays RECEIVED; the
// redelivery starts the saga and only then records SAGA_STARTED.
func TestFailedStartIsNotRecordedAsStarted(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := temporalx.Dial(ctx, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	queue := fmt.Sprintf("starter-test-%x", testenv.RandomUint64())
	failReg := prometheus.NewRegistry()
	failing, err := sagastarter.New(pool, failingStart{tc}, queue, testenv.Deriver(t, cfg), failReg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	m := message(t, testenv.Deriver(t, cfg))
	d := delivery(t, m)
	wid := workflows.ReservationWorkflowID(m.ReservationID.String())
	inbox := func() (code string, processedAt, createdAt time.Time) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT result_code, processed_at, created_at FROM consumer_inbox WHERE consumer_group = $1 AND message_id = $2`,
			sagastarter.ConsumerGroup, m.MessageID).Scan(&code, &processedAt, &createdAt); err != nil {
			t.Fatalf("read inbox row: %v", err)
		}
		return code, processedAt, createdAt
	}

	if err := failing.Handle(ctx, d); !errors.Is(err, errStartRefused) {
		t.Fatalf("Handle with a refused start = %v, want an error wrapping %v (redelivery)", err, errStartRefused)
	}
	if code, _, _ := inbox(); code == "SAGA_STARTED" {
		t.Fatal("inbox says SAGA_STARTED although Temporal refused the start")
	} else if code != "RECEIVED" {
		t.Fatalf("inbox result_code = %q after a refused start, want RECEIVED", code)
	}
	if got := consumed(t, failReg, sagastarter.ResultRetry); got != 1 {
		t.Fatalf("retry counter = %v, want 1", got)
	}
	var notFound *serviceerror.NotFound
	if _, err := tc.DescribeWorkflowExecution(ctx, wid, ""); !errors.As(err, &notFound) {
		t.Fatalf("describe %s after a refused start: %v, want NotFound", wid, err)
	}

	// The redelivery, through a Starter whose Temporal accepts the start.
	reg := prometheus.NewRegistry()
	st, err := sagastarter.New(pool, tc, queue, testenv.Deriver(t, cfg), reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	d.ReconsumeTimes = 1
	if err := st.Handle(ctx, d); err != nil {
		t.Fatalf("redelivery: %v", err)
	}
	t.Cleanup(func() { tc.TerminateWorkflow(context.Background(), wid, "", "test done") })
	code, processedAt, createdAt := inbox()
	if code != "SAGA_STARTED" {
		t.Fatalf("inbox result_code = %q after the accepted start, want SAGA_STARTED", code)
	}
	if !processedAt.After(createdAt) {
		t.Errorf("processed_at %v not after created_at %v: the row was not updated when the start was accepted", processedAt, createdAt)
	}
	desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatalf("saga not started by the redelivery: %v", err)
	}
	if desc.WorkflowExecutionInfo.Status != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("saga status %v", desc.WorkflowExecutionInfo.Status)
	}
	if got := consumed(t, reg, sagastarter.ResultStarted); got != 1 {
		t.Fatalf("started counter = %v, want 1 (the delivery that recorded the start)", got)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, m.MessageID).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("inbox rows of the message = %d (%v), want 1", rows, err)
	}
}
