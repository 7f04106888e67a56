package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/state/steps"
)

// bulkRepairV0 is BulkRepairWorkflow as it ran before it recorded its items
// in PostgreSQL (bulk_repair_item): one RepairBatch activity a page, every
// item in the report, the limit counting every saga listed. Bulk repairs
// started on that code replay through it (workflows/testdata/bulk/
// bulk_v0_query.json); it goes once none of them runs. (It schedules
// ListSagas even with ManualReviewOf, whose page token that activity
// refuses: kept, as its histories hold it; bulkRepairSliced does not.)
func bulkRepairV0(ctx workflow.Context, in BulkRepairInput) (BulkRepairReport, error) {
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
		var items []steps.BulkItem
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
