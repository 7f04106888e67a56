package workflows

import (
	"path/filepath"
	"testing"
)

// TestReplayBulkRepairHistories replays the BulkRepairWorkflow histories
// e2e.TestRecordBulkRepairHistories recorded from real bulk repairs on the
// dev server (workflows/testdata/bulk). A change to BulkRepairWorkflow that
// would break a bulk repair under way fails here; put it behind
// workflow.GetVersion (docs/architecture.md, "Changing workflow code").
func TestReplayBulkRepairHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/bulk/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("recorded bulk repair histories: %v %v, want at least one", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := newReplayer(t)
			r.RegisterWorkflow(BulkRepairWorkflow)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
