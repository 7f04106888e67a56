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
	"github.com/seckill/seckill/state/steps"
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
	// Limit stops after this many sagas repaired (APPLIED, or WOULD_APPLY
	// in a dry run); refused and skipped ones do not count, so the same
	// repair run again goes on with the rest.
	Limit int
	// Progress is where a bulk repair that continued as new stands (set by
	// the workflow itself, never by a caller).
	Progress *BulkRepairProgress `json:",omitempty"`
}

// BulkRepairProgress is carried from one run of a bulk repair to the next
// (continue-as-new at a page boundary keeps the history short).
type BulkRepairProgress struct {
	BulkID string
	Page   []byte // the next page to list
	Listed int
	Tally  activities.BulkTally
	Wait   time.Duration `json:",omitempty"`
}

// BulkRepairItem is what happened to one saga.
type BulkRepairItem = steps.BulkItem

// BulkRepairReport is the workflow's result: the counts. What it did to
// each saga is in bulk_repair_item under BulkID (activities.BulkItems, the
// CLI's `repair bulk-items`); only bulk repairs of the old shape
// (bulkRepairV0) carry Items.
type BulkRepairReport struct {
	BulkID          string `json:",omitempty"`
	Query, Action   string
	DryRun          bool
	Listed          int
	Applied, Would  int
	Refused         int
	Skipped         int
	Truncated       bool
	Items           []BulkRepairItem `json:",omitempty"`
	RefusedByReason map[string]int
}

// Outcomes of one saga in a bulk repair.
const (
	BulkApplied    = steps.BulkApplied
	BulkWouldApply = steps.BulkWouldApply
	BulkRefused    = steps.BulkRefused
	BulkSkipped    = steps.BulkSkipped
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
	case !slices.Contains(steps.RepairActions, in.Action):
		return fmt.Errorf("--action %q: want one of %s", in.Action, strings.Join(steps.RepairActions, ", "))
	case strings.TrimSpace(in.Operator) == "" || len(in.Operator) > 128:
		return errors.New("--operator is required (1-128 characters): who is doing this")
	case strings.TrimSpace(in.Reason) == "" || len(in.Reason) > 2000:
		return errors.New("--reason is required (1-2000 characters): why, with the evidence or incident id")
	case !(in.PerSecond >= minBulkRate && in.PerSecond <= 1000):
		return fmt.Errorf("--rate %v: want a number of signals a second from %.6f (one a day) to 1000", in.PerSecond, minBulkRate)
	case in.Progress != nil:
		return errors.New("progress is the workflow's own (continue-as-new), not an input")
	case in.Limit <= 0 || in.Limit > 100000:
		return fmt.Errorf("--limit %d: want between 1 and 100000", in.Limit)
	}
	return nil
}

// minBulkRate is the slowest pace: one signal a day.
const minBulkRate = 1.0 / 86400

// BulkRepairWorkflowIDPrefix starts every bulk repair's workflow ID.
const BulkRepairWorkflowIDPrefix = "bulk-repair-"

var bulkAct *activities.BulkRepair

// BulkRepairWorkflow lists the sagas of in.Query (or the MANUAL_REVIEW
// reservations of in.ManualReviewOf), checks the repair against PostgreSQL
// for each (refused ones are recorded with their reason and not signalled),
// and signals the others with a fixed repair_id, at most in.PerSecond, until
// in.Limit sagas are repaired. With DryRun nothing is signalled: the report
// says what would happen. The saga itself validates and records each repair
// again (ApplyRepair), so a state that changed between the check and the
// signal is refused there. Every outcome goes to bulk_repair_item as it
// happens; the result holds only counts, and the workflow continues as new
// at a page boundary when its history grows, so neither the result nor the
// history grows with the number of sagas.
func BulkRepairWorkflow(ctx workflow.Context, in BulkRepairInput) (BulkRepairReport, error) {
	if workflow.GetVersion(ctx, bulkSlicedChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return bulkRepairV0(ctx, in)
	}
	return bulkRepairSliced(ctx, in)
}

// bulkSlicedChange marks the shape that records items in PostgreSQL and
// works in slices (bulkRepairSliced).
const bulkSlicedChange = "bulk-repair-sliced"

// bulkHistoryBudget: past this many events, the next page starts a new run.
var bulkHistoryBudget = 10000

func bulkRepairSliced(ctx workflow.Context, in BulkRepairInput) (BulkRepairReport, error) {
	p := BulkRepairProgress{}
	if in.Progress != nil {
		p = *in.Progress
	} else {
		info := workflow.GetInfo(ctx)
		p.BulkID = info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID
	}
	retry := &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10}
	listCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, RetryPolicy: retry})
	sliceCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: activities.BulkSliceTimeout, HeartbeatTimeout: time.Minute, RetryPolicy: retry})
	for {
		var page activities.ListPage
		var list workflow.Future
		if in.ManualReviewOf != 0 {
			list = workflow.ExecuteActivity(listCtx, bulkAct.ListManualReview, in.ManualReviewOf, p.Page)
		} else {
			list = workflow.ExecuteActivity(listCtx, bulkAct.ListSagas, in.Query, p.Page)
		}
		if err := list.Get(ctx, &page); err != nil {
			return bulkReport(in, p, false), err
		}
		for done := 0; done < len(page.WorkflowIDs); {
			if p.Tally.Repaired() >= in.Limit {
				return bulkReport(in, p, true), nil
			}
			if err := bulkPace(ctx, &p); err != nil {
				return bulkReport(in, p, false), err
			}
			var r activities.BulkSliceResult
			if err := workflow.ExecuteActivity(sliceCtx, bulkAct.RepairSlice, activities.BulkSlice{
				BulkBatch: activities.BulkBatch{WorkflowIDs: page.WorkflowIDs[done:], Action: in.Action, RepairIDPrefix: in.RepairIDPrefix,
					Operator: in.Operator, Reason: in.Reason, DryRun: in.DryRun, PerSecond: in.PerSecond, Resume: in.ManualReviewOf != 0},
				BulkID: p.BulkID, Quota: in.Limit - p.Tally.Repaired(), Wait: p.Wait,
			}).Get(ctx, &r); err != nil {
				return bulkReport(in, p, false), err
			}
			done += r.Done
			p.Listed += r.Done
			p.Tally.Merge(r.Tally) //workflowcheck:ignore sums counts from a map: the order does not matter
			p.Wait = r.Wait
		}
		if len(page.NextPage) == 0 {
			return bulkReport(in, p, false), nil
		}
		p.Page = page.NextPage
		if p.Tally.Repaired() >= in.Limit {
			return bulkReport(in, p, true), nil
		}
		if info := workflow.GetInfo(ctx); info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= bulkHistoryBudget {
			in.Progress = &p
			return BulkRepairReport{}, workflow.NewContinueAsNewError(ctx, BulkRepairWorkflow, in)
		}
	}
}

// bulkPace waits out, with a timer, a pace longer than a slice waits itself.
func bulkPace(ctx workflow.Context, p *BulkRepairProgress) error {
	if p.Wait <= activities.BulkSliceMaxWait {
		return nil
	}
	if err := workflow.Sleep(ctx, p.Wait); err != nil {
		return err
	}
	p.Wait = 0
	return nil
}

func bulkReport(in BulkRepairInput, p BulkRepairProgress, truncated bool) BulkRepairReport {
	return BulkRepairReport{BulkID: p.BulkID, Query: in.Query, Action: in.Action, DryRun: in.DryRun, Listed: p.Listed,
		Applied: p.Tally.Applied, Would: p.Tally.Would, Refused: p.Tally.Refused, Skipped: p.Tally.Skipped,
		Truncated: truncated, RefusedByReason: p.Tally.RefusedByReason}
}
