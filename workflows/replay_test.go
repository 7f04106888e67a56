package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayRecordedHistories replays histories recorded from real sagas on
// the dev server (`temporal workflow show --output json`): a paid order, a
// compensated rejection and an expired, cancelled order. A change to the
// workflow code that would break running sagas fails here; put it behind
// workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/saga_*.json")
	if err != nil || len(files) < 3 {
		t.Fatalf("recorded histories: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(ReservationSaga)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
