package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state/steps"
)

// BulkRepair holds the activities of the bulk repair workflow: list the
// sagas a visibility query names, check a repair against PostgreSQL, and
// send the repair signal. Registered beside Activities where the worker has
// a Temporal client.
type BulkRepair struct {
	pool *pgxpool.Pool
	tc   client.Client
	// resume sends a repair to a saga, starting it again from PostgreSQL
	// when it does not run (workflows.RepairSaga).
	resume ResumeRepair
}

// ResumeRepair sends req to m's saga, starting it again from PostgreSQL when
// it does not run (workflows.RepairSaga; activities cannot import workflows).
type ResumeRepair func(ctx context.Context, m events.OrderCreateRequested, req steps.RepairRequest) error

// NewBulkRepair returns the activities; every argument is required.
func NewBulkRepair(pool *pgxpool.Pool, tc client.Client, resume ResumeRepair) (*BulkRepair, error) {
	if pool == nil || tc == nil || resume == nil {
		return nil, errors.New("activities: bulk repair needs a pool, a Temporal client and a way to resume sagas")
	}
	return &BulkRepair{pool: pool, tc: tc, resume: resume}, nil
}

// ListPage is one page of the sagas a query lists.
type ListPage struct {
	// WorkflowIDs are the reservation sagas (other workflow types are left out).
	WorkflowIDs []string
	NextPage    []byte
}

// RepairSignal is the name of the saga's repair signal (workflows.SignalRepair).
const RepairSignal = "repair"

// reservationPrefix starts every reservation saga's workflow ID (ReservationWorkflowID).
const reservationPrefix = "reservation-"

// ListSagas lists one page of the running executions query names.
func (b *BulkRepair) ListSagas(ctx context.Context, query string, page []byte) (ListPage, error) {
	resp, err := b.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 200, NextPageToken: page})
	if err != nil {
		return ListPage{}, fmt.Errorf("list sagas %q: %w", query, err)
	}
	out := ListPage{NextPage: resp.GetNextPageToken()}
	for _, e := range resp.GetExecutions() {
		if id := e.GetExecution().GetWorkflowId(); strings.HasPrefix(id, reservationPrefix) {
			out.WorkflowIDs = append(out.WorkflowIDs, id)
		}
	}
	return out, nil
}

// manualReviewPage bounds one page of ListManualReview.
const manualReviewPage = 200

// ListManualReview lists one page of the reservations of activityID that
// PostgreSQL holds in MANUAL_REVIEW and no operator marked resolved,
// whatever their saga does (running, closed, never started), as saga workflow IDs, in reservation id order
// after page (the last id of the previous page; empty: from the start).
func (b *BulkRepair) ListManualReview(ctx context.Context, activityID int64, page []byte) (ListPage, error) {
	after := uuid.Nil
	if len(page) > 0 {
		var err error
		if after, err = uuid.FromBytes(page); err != nil {
			return ListPage{}, fmt.Errorf("list manual review: bad page token: %w", err)
		}
	}
	rows, err := b.pool.Query(ctx, `SELECT reservation_id FROM inventory_reservation
		WHERE activity_id = $1 AND status = 'MANUAL_REVIEW' AND reservation_id > $2
		  AND NOT EXISTS (SELECT 1 FROM repair_task t WHERE t.object_id = reservation_id::text
		                  AND t.rule_name = 'MANUAL:mark-resolved' AND t.status = 'APPLIED')
		ORDER BY reservation_id LIMIT $3`, activityID, after, manualReviewPage)
	if err != nil {
		return ListPage{}, fmt.Errorf("list manual review of %d: %w", activityID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return ListPage{}, fmt.Errorf("list manual review of %d: %w", activityID, err)
	}
	var out ListPage
	for _, id := range ids {
		out.WorkflowIDs = append(out.WorkflowIDs, reservationPrefix+id.String())
	}
	if len(ids) == manualReviewPage {
		out.NextPage = ids[len(ids)-1][:]
	}
	return out, nil
}

// CheckRepair says whether action would be accepted for the saga's
// reservation now ("" if so, else why not), changing nothing.
func (b *BulkRepair) CheckRepair(ctx context.Context, workflowID, action string) (string, error) {
	rid, err := uuid.Parse(strings.TrimPrefix(workflowID, reservationPrefix))
	if err != nil {
		return "not a reservation saga: " + workflowID, nil
	}
	var refuse string
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		refuse, err = repairs.Check(ctx, tx, rid, action)
		return err
	})
	return refuse, err
}

// SignalRepair sends the repair signal to a running saga. A saga that ended
// meanwhile is reported, not an error.
func (b *BulkRepair) SignalRepair(ctx context.Context, workflowID string, req steps.RepairRequest) (bool, error) {
	err := b.tc.SignalWorkflow(ctx, workflowID, "", RepairSignal, req)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("signal %s: %w", workflowID, err)
	}
	return true, nil
}

// BulkBatch is one page of sagas to repair the same way.
type BulkBatch struct {
	WorkflowIDs    []string
	Action         string
	RepairIDPrefix string // each saga's repair_id is the prefix + its workflow ID
	Operator       string
	Reason         string
	DryRun         bool
	PerSecond      float64 // signals a second at most
	// Resume: each saga that does not run is started again from PostgreSQL
	// with the repair as its first signal, instead of skipped.
	Resume bool `json:",omitempty"`
}

// RepairBatch checks each saga's repair against PostgreSQL and (unless a
// dry run) signals the ones it fits, paced at PerSecond. Only bulk repairs
// started before RepairSlice existed call it (their history schedules it);
// it goes once none of them runs. It heartbeats its
// position: a retried attempt carries on from there (signalling again would
// be harmless: the repair_ids are fixed).
func (b *BulkRepair) RepairBatch(ctx context.Context, in BulkBatch) ([]steps.BulkItem, error) {
	pace := time.Duration(float64(time.Second) / max(in.PerSecond, 0.001))
	out := make([]steps.BulkItem, 0, len(in.WorkflowIDs))
	start := 0
	if activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &start, &out)
	}
	for i := start; i < len(in.WorkflowIDs); i++ {
		it, err := b.repairOne(ctx, in, in.WorkflowIDs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, i+1, out)
		}
		if it.Outcome == steps.BulkApplied {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(pace):
			}
		}
	}
	return out, nil
}

func (b *BulkRepair) repairOne(ctx context.Context, in BulkBatch, id string) (steps.BulkItem, error) {
	it, err := b.decide(ctx, in, id)
	if err != nil || it.Outcome != "" {
		return it, err
	}
	return b.send(ctx, in, it)
}

// decide checks the repair of one saga against PostgreSQL: the item comes
// back REFUSED (with the reason), WOULD_APPLY (a dry run) or with no outcome
// yet (to be sent).
func (b *BulkRepair) decide(ctx context.Context, in BulkBatch, id string) (steps.BulkItem, error) {
	it := steps.BulkItem{WorkflowID: id}
	refuse, err := b.CheckRepair(ctx, id, in.Action)
	switch {
	case err != nil:
		return it, err
	case refuse != "":
		it.Outcome, it.Reason = steps.BulkRefused, refuse
	case in.DryRun:
		it.Outcome = steps.BulkWouldApply
	}
	return it, nil
}

// send sends the repair decide let through: APPLIED, or SKIPPED when the
// saga no longer runs (with Resume, it is started again instead).
func (b *BulkRepair) send(ctx context.Context, in BulkBatch, it steps.BulkItem) (steps.BulkItem, error) {
	req := steps.RepairRequest{Action: in.Action, RepairID: in.RepairIDPrefix + it.WorkflowID, Operator: in.Operator, Reason: in.Reason}
	if in.Resume {
		return b.resumeOne(ctx, it, req)
	}
	sent, err := b.SignalRepair(ctx, it.WorkflowID, req)
	if err != nil {
		return it, err
	}
	it.Outcome = steps.BulkApplied
	if !sent {
		it.Outcome, it.Reason = steps.BulkSkipped, "the saga is not running any more"
	}
	return it, nil
}

// resumeOne sends req to the saga of it, starting it again from PostgreSQL
// if it does not run.
func (b *BulkRepair) resumeOne(ctx context.Context, it steps.BulkItem, req steps.RepairRequest) (steps.BulkItem, error) {
	rid, err := uuid.Parse(strings.TrimPrefix(it.WorkflowID, reservationPrefix))
	if err != nil {
		it.Outcome, it.Reason = steps.BulkRefused, "not a reservation saga: "+it.WorkflowID
		return it, nil
	}
	m, err := inventory.Message(ctx, b.pool, rid)
	if err != nil {
		return it, err
	}
	if err := b.resume(ctx, m, req); err != nil {
		return it, err
	}
	it.Outcome = steps.BulkApplied
	return it, nil
}
