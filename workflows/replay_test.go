package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded from real sagas on
// the dev server: the three recorded with `temporal workflow show --output
// json` (paid, compensated, expired and cancelled) and those
// e2e.TestRecordSagaHistories records (manual review ended by
// retry-compensation and by mark-resolved with a refused repair before it,
// rebuild-projection then force-cancel-unpaid, the buyer's cancel, a late
// message, a lost saga resumed from PostgreSQL, the refund of a payment on a
// cancelled order). A change to the workflow code that would break running
// sagas fails here; put it behind workflow.GetVersion (docs/architecture.md,
// "Changing workflow code").
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("recorded histories: %v %v, want at least 10", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(ReservationSaga)
			r.RegisterWorkflow(RefundWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
