package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
)

func bulkEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.BulkRepair{})
	env.RegisterWorkflow(BulkRepairWorkflow)
	return env
}

func bulkInput() BulkRepairInput {
	return BulkRepairInput{ManualReviewOf: 7, Action: "mark-resolved", Operator: "alice", Reason: "r", PerSecond: 1.0 / 120, Limit: 100}
}

// A slice that stops before a pace longer than it waits itself: the
// workflow sleeps it out with a timer, then the next slice goes on from the
// saga the first one left.
func TestBulkRepairPacesWithATimer(t *testing.T) {
	env := bulkEnv(t)
	ids := []string{"reservation-a", "reservation-b"}
	env.OnActivity(bulkAct.ListManualReview, mock.Anything, int64(7), []byte(nil)).Return(activities.ListPage{WorkflowIDs: ids}, nil).Once()
	env.OnActivity(bulkAct.RepairSlice, mock.Anything, mock.MatchedBy(func(in activities.BulkSlice) bool { return len(in.WorkflowIDs) == 2 })).
		Return(activities.BulkSliceResult{Done: 1, Tally: activities.BulkTally{Applied: 1}, Wait: 2 * time.Minute}, nil).Once()
	var slept time.Time
	env.OnActivity(bulkAct.RepairSlice, mock.Anything, mock.MatchedBy(func(in activities.BulkSlice) bool {
		return len(in.WorkflowIDs) == 1 && in.WorkflowIDs[0] == "reservation-b" && in.Wait == 0 && in.Quota == 99
	})).Run(func(mock.Arguments) { slept = env.Now() }).Return(activities.BulkSliceResult{Done: 1, Tally: activities.BulkTally{Applied: 1}, Wait: 2 * time.Minute}, nil).Once()
	began := env.Now()
	env.ExecuteWorkflow(BulkRepairWorkflow, bulkInput())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var rep BulkRepairReport
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 2 || rep.Listed != 2 || rep.Truncated {
		t.Fatalf("report %+v, want 2 applied of 2 listed", rep)
	}
	if d := slept.Sub(began); d < 2*time.Minute {
		t.Fatalf("second slice ran %s after the start, want after the 2 min pace", d)
	}
	env.AssertExpectations(t)
}

// Past its history budget, a bulk repair continues as new at the next page
// with its counts and the page token; the limit counts repaired sagas only.
func TestBulkRepairContinuesAsNew(t *testing.T) {
	defer func(b int) { bulkHistoryBudget = b }(bulkHistoryBudget)
	bulkHistoryBudget = 0 // the test environment reports no history length
	env := bulkEnv(t)
	env.OnActivity(bulkAct.ListManualReview, mock.Anything, int64(7), []byte(nil)).
		Return(activities.ListPage{WorkflowIDs: []string{"reservation-a", "reservation-b"}, NextPage: []byte("p2")}, nil).Once()
	env.OnActivity(bulkAct.RepairSlice, mock.Anything, mock.Anything).
		Return(activities.BulkSliceResult{Done: 2, Tally: activities.BulkTally{Applied: 1, Refused: 1, RefusedByReason: map[string]int{"x": 1}}}, nil).Once()
	env.ExecuteWorkflow(BulkRepairWorkflow, bulkInput())
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	var next BulkRepairInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	p := next.Progress
	if p == nil || string(p.Page) != "p2" || p.Listed != 2 || p.Tally.Applied != 1 || p.Tally.Refused != 1 || p.BulkID == "" {
		t.Fatalf("carried progress %+v, want page p2, 2 listed, 1 applied, 1 refused, a bulk id", p)
	}

	// The next run starts where that one stood and ends at the limit.
	env = bulkEnv(t)
	next.Limit = 2
	env.OnActivity(bulkAct.ListManualReview, mock.Anything, int64(7), []byte("p2")).
		Return(activities.ListPage{WorkflowIDs: []string{"reservation-c", "reservation-d"}, NextPage: []byte("p3")}, nil).Once()
	env.OnActivity(bulkAct.RepairSlice, mock.Anything, mock.MatchedBy(func(in activities.BulkSlice) bool {
		return in.Quota == 1 && in.BulkID == p.BulkID
	})).Return(activities.BulkSliceResult{Done: 1, Tally: activities.BulkTally{Applied: 1}}, nil).Once()
	env.ExecuteWorkflow(BulkRepairWorkflow, next)
	var rep BulkRepairReport
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Applied != 2 || rep.Refused != 1 || rep.Listed != 3 || !rep.Truncated || rep.BulkID != p.BulkID {
		t.Fatalf("second run's report %+v, want 2 applied, 1 refused, 3 listed, truncated, same bulk id", rep)
	}
}
