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
// saga a visibility query lists.
type BulkRepairInput struct {
	Query    string
	Action   string
	Operator string
	Reason   string
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
type BulkRepairItem struct {
	WorkflowID string
	// Outcome: APPLIED (signalled), WOULD_APPLY (dry run), REFUSED (the
	// repair does not fit its state: Reason), SKIPPED (not running any more).
	Outcome string
	Reason  string `json:",omitempty"`
}

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
	BulkApplied    = "APPLIED"
	BulkWouldApply = "WOULD_APPLY"
	BulkRefused    = "REFUSED"
	BulkSkipped    = "SKIPPED"
)

// ValidateBulkRepair refuses bad input before anything is started: each
// error names the flag and what it wants.
func ValidateBulkRepair(in BulkRepairInput) error {
	switch {
	case strings.TrimSpace(in.Query) == "":
		return errors.New("--query is required: the Temporal visibility query of the sagas to repair")
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
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	pace := time.Duration(float64(time.Second) / max(in.PerSecond, 0.001))
	var ids []string
	var page []byte
	for {
		var p activities.ListPage
		if err := workflow.ExecuteActivity(ctx, bulkAct.ListSagas, in.Query, page).Get(ctx, &p); err != nil {
			return rep, err
		}
		ids = append(ids, p.WorkflowIDs...)
		if len(p.NextPage) == 0 || len(ids) >= in.Limit {
			break
		}
		page = p.NextPage
	}
	if len(ids) > in.Limit {
		ids, rep.Truncated = ids[:in.Limit], true
	}
	rep.Listed = len(ids)
	for i, id := range ids {
		it, err := bulkOne(ctx, in, id)
		if err != nil {
			return rep, err
		}
		rep.add(it)
		if it.Outcome == BulkApplied && i < len(ids)-1 {
			if err := workflow.Sleep(ctx, pace); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// bulkOne checks and (unless a dry run) signals one saga.
func bulkOne(ctx workflow.Context, in BulkRepairInput, id string) (BulkRepairItem, error) {
	it := BulkRepairItem{WorkflowID: id}
	var refuse string
	if err := workflow.ExecuteActivity(ctx, bulkAct.CheckRepair, id, in.Action).Get(ctx, &refuse); err != nil {
		return it, err
	}
	switch {
	case refuse != "":
		it.Outcome, it.Reason = BulkRefused, refuse
		return it, nil
	case in.DryRun:
		it.Outcome = BulkWouldApply
		return it, nil
	}
	req := activities.RepairRequest{Action: in.Action, RepairID: in.RepairIDPrefix + id, Operator: in.Operator, Reason: in.Reason}
	var sent bool
	if err := workflow.ExecuteActivity(ctx, bulkAct.SignalRepair, id, req).Get(ctx, &sent); err != nil {
		return it, err
	}
	it.Outcome = BulkApplied
	if !sent {
		it.Outcome, it.Reason = BulkSkipped, "the saga is not running any more"
	}
	return it, nil
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
