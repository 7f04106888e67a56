package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/workflows"
)

// TestRecordBulkRepairHistories records, from a real bulk repair on the dev
// server, the histories workflows.TestReplayBulkRepairHistories replays
// (workflows/testdata/bulk). Run it after a deliberate, versioned change to
// BulkRepairWorkflow (docs/architecture.md, "Changing workflow code"):
//
//	SECKILL_RECORD_HISTORIES=1 SECKILL_INTEGRATION=1 go test -run TestRecordBulkRepairHistories ./e2e/
func TestRecordBulkRepairHistories(t *testing.T) {
	if os.Getenv("SECKILL_RECORD_HISTORIES") != "1" {
		t.Skip("records workflows/testdata/bulk: set SECKILL_RECORD_HISTORIES=1")
	}
	// The current shape (bulkRepairSliced), paced slower than a slice waits
	// itself: the history holds the pace timers. bulk_v0_query.json, the shape
	// before it, stays as it was recorded.
	const open, stuck = 1, 3
	r := newBulkRig(t, open+stuck, open)
	ctx := context.Background()
	r.start(t, r.msgs[:open])
	r.visible(t, "ORDER_CREATED", open)
	r.stuck(t, r.msgs[open:])
	r.visible(t, "MANUAL_REVIEW", stuck)
	in := workflows.BulkRepairInput{Query: r.ofSale, Action: "mark-resolved", Operator: "recorder", Reason: "recorded bulk repair",
		PerSecond: 1.0 / 25, Limit: 100}
	run, err := app.StartBulkRepair(ctx, r.conns.Temporal, r.cfg.TemporalTaskQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	var rep workflows.BulkRepairReport
	if err := run.Get(ctx, &rep); err != nil || rep.Applied != stuck || rep.Refused != open {
		t.Fatalf("bulk repair: %s, %v", summary(rep), err)
	}
	dir := filepath.Join("..", "workflows", "testdata", "bulk")
	writeBulkHistories(t, r.conns.Temporal, run.GetID(), dir, "bulk_v1_paced")
}

// writeBulkHistories writes the history of every run of workflowID (oldest
// first; each continue-as-new starts a run) as `temporal workflow show
// --output json` does: name.json for one run, name_1.json, name_2.json, …
// for a chain.
func writeBulkHistories(t *testing.T, tc client.Client, workflowID, dir, name string) {
	t.Helper()
	ctx := context.Background()
	var runs []*historypb.History
	for runID := ""; ; {
		h := &historypb.History{}
		it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		runs = append([]*historypb.History{h}, runs...)
		first := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
		if first.GetContinuedExecutionRunId() == "" {
			break
		}
		runID = first.GetContinuedExecutionRunId()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, h := range runs {
		path := filepath.Join(dir, name+".json")
		if len(runs) > 1 {
			path = filepath.Join(dir, fmt.Sprintf("%s_%d.json", name, i+1))
		}
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s (%d events)", path, len(h.Events))
	}
}
