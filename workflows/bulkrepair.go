package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
)

// BulkRepairInput is one bulk repair: the same repair for every running
// saga a visibility query lists, or for every reservation of a sale that
// PostgreSQL holds in MANUAL_REVIEW (ManualReviewOf).
type BulkRepairInput struct {
	Query string
	// ManualReviewOf, instead of Query: every reservation of this sale in
	// MANUAL_REVIEW in PostgreSQL, whatever its saga does. A saga that does
	// not run (terminated, failed, never started) is started again from
	// PostgreSQL with the repair as its first signal (RepairSaga).
	ManualReviewOf int64 `json:",omitempty"`
	Action         string
	Operator       string
	Reason         string
	// RepairIDPrefix makes each saga's repair_id (prefix + workflow ID):
	// the same bulk repair run again signals the same ids, which the sagas
	// record once.
	RepairIDPrefix string
	DryRun         bool
	// PerSecond paces the signals (at most this many a second).
	PerSecond float64
	// Limit stops after this many sagas (a bounded history).
	Limit int
}

// BulkRepairItem is what happened to one saga.
type BulkRepairItem = activities.BulkItem

// BulkRepairReport is the workflow's result.
type BulkRepairReport struct {
	Query, Action   string
	DryRun          bool
	Listed          int
	Applied, Would  int
	Refused         int
	Skipped         int
	Truncated       bool
	Items           []BulkRepairItem
	RefusedByReason map[string]int
}

// Outcomes of one saga in a bulk repair.
const (
	BulkApplied    = activities.BulkApplied
	BulkWouldApply = activities.BulkWouldApply
	BulkRefused    = activities.BulkRefused
	BulkSkipped    = activities.BulkSkipped
)

// ValidateBulkRepair refuses bad input before anything is started: each
// error names the flag and what it wants.
func ValidateBulkRepair(in BulkRepairInput) error {
	switch {
	case strings.TrimSpace(in.Query) == "" && in.ManualReviewOf == 0:
		return errors.New("--query or --manual-review-of is required: the Temporal visibility query of the running sagas to repair, or the sale whose MANUAL_REVIEW reservations to repair")
	case strings.TrimSpace(in.Query) != "" && in.ManualReviewOf != 0:
		return errors.New("--query and --manual-review-of exclude each other: --manual-review-of lists every MANUAL_REVIEW reservation of the sale, running saga or not")
	case in.ManualReviewOf < 0:
		return fmt.Errorf("--manual-review-of %d: want a sale's activity id", in.ManualReviewOf)
	case !slices.Contains(activities.RepairActions, in.Action):
		return fmt.Errorf("--action %q: want one of %s", in.Action, strings.Join(activities.RepairActions, ", "))
	case strings.TrimSpace(in.Operator) == "" || len(in.Operator) > 128:
		return errors.New("--operator is required (1-128 characters): who is doing this")
	case strings.TrimSpace(in.Reason) == "" || len(in.Reason) > 2000:
		return errors.New("--reason is required (1-2000 characters): why, with the evidence or incident id")
	case in.PerSecond <= 0 || in.PerSecond > 1000:
		return fmt.Errorf("--rate %v: want a number of signals a second between 0 and 1000", in.PerSecond)
	case in.Limit <= 0 || in.Limit > 100000:
		return fmt.Errorf("--limit %d: want between 1 and 100000", in.Limit)
	}
	return nil
}

// BulkRepairWorkflowIDPrefix starts every bulk repair's workflow ID.
const BulkRepairWorkflowIDPrefix = "bulk-repair-"

var bulkAct *activities.BulkRepair

// BulkRepairWorkflow lists the sagas of in.Query, checks the repair against
// PostgreSQL for each (refused ones are reported with their reason and not
// signalled), and signals the others with a fixed repair_id, paced at
// in.PerSecond. With DryRun nothing is signalled: the report says what
// would happen. The saga itself validates and records each repair again
// (ApplyRepair), so a state that changed between the check and the signal is
// refused there.
func BulkRepairWorkflow(ctx workflow.Context, in BulkRepairInput) (BulkRepairReport, error) {
	rep := BulkRepairReport{Query: in.Query, Action: in.Action, DryRun: in.DryRun, RefusedByReason: map[string]int{}}
	listCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	batchCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	var page []byte
	for rep.Listed < in.Limit {
		var p activities.ListPage
		list := workflow.ExecuteActivity(listCtx, bulkAct.ListSagas, in.Query, page)
		if in.ManualReviewOf != 0 { // chosen by the input: runs without it replay as they ran
			list = workflow.ExecuteActivity(listCtx, bulkAct.ListManualReview, in.ManualReviewOf, page)
		}
		if err := list.Get(ctx, &p); err != nil {
			return rep, err
		}
		ids := p.WorkflowIDs
		if rep.Listed+len(ids) > in.Limit {
			ids, rep.Truncated = ids[:in.Limit-rep.Listed], true
		}
		rep.Listed += len(ids)
		var items []activities.BulkItem
		if err := workflow.ExecuteActivity(batchCtx, bulkAct.RepairBatch, activities.BulkBatch{WorkflowIDs: ids, Action: in.Action,
			RepairIDPrefix: in.RepairIDPrefix, Operator: in.Operator, Reason: in.Reason, DryRun: in.DryRun,
			PerSecond: in.PerSecond, Resume: in.ManualReviewOf != 0}).Get(ctx, &items); err != nil {
			return rep, err
		}
		for _, it := range items {
			rep.add(it)
		}
		if len(p.NextPage) == 0 {
			break
		}
		page = p.NextPage
	}
	return rep, nil
}

func (r *BulkRepairReport) add(it BulkRepairItem) {
	r.Items = append(r.Items, it)
	switch it.Outcome {
	case BulkApplied:
		r.Applied++
	case BulkWouldApply:
		r.Would++
	case BulkRefused:
		r.Refused++
		r.RefusedByReason[it.Reason]++
	case BulkSkipped:
		r.Skipped++
	}
}
