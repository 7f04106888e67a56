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

	"github.com/seckill/seckill/internal/repairs"
)

// BulkRepair holds the activities of the bulk repair workflow: list the
// sagas a visibility query names, check a repair against PostgreSQL, and
// send the repair signal. Registered beside Activities where the worker has
// a Temporal client.
type BulkRepair struct {
	pool *pgxpool.Pool
	tc   client.Client
}

// NewBulkRepair returns the activities; both arguments are required.
func NewBulkRepair(pool *pgxpool.Pool, tc client.Client) (*BulkRepair, error) {
	if pool == nil || tc == nil {
		return nil, errors.New("activities: bulk repair needs a pool and a Temporal client")
	}
	return &BulkRepair{pool: pool, tc: tc}, nil
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
func (b *BulkRepair) SignalRepair(ctx context.Context, workflowID string, req RepairRequest) (bool, error) {
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

// BulkItem is what a bulk repair did to one saga.
type BulkItem struct {
	WorkflowID string
	// Outcome: APPLIED (signalled), WOULD_APPLY (dry run), REFUSED (the
	// repair does not fit its state: Reason), SKIPPED (not running any more).
	Outcome string
	Reason  string `json:",omitempty"`
}

// Outcomes of one saga in a bulk repair.
const (
	BulkApplied    = "APPLIED"
	BulkWouldApply = "WOULD_APPLY"
	BulkRefused    = "REFUSED"
	BulkSkipped    = "SKIPPED"
)

// BulkBatch is one page of sagas to repair the same way.
type BulkBatch struct {
	WorkflowIDs    []string
	Action         string
	RepairIDPrefix string // each saga's repair_id is the prefix + its workflow ID
	Operator       string
	Reason         string
	DryRun         bool
	PerSecond      float64 // signals a second at most
}

// RepairBatch checks each saga's repair against PostgreSQL and (unless a
// dry run) signals the ones it fits, paced at PerSecond. It heartbeats its
// position: a retried attempt carries on from there (signalling again would
// be harmless: the repair_ids are fixed).
func (b *BulkRepair) RepairBatch(ctx context.Context, in BulkBatch) ([]BulkItem, error) {
	pace := time.Duration(float64(time.Second) / max(in.PerSecond, 0.001))
	out := make([]BulkItem, 0, len(in.WorkflowIDs))
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
		if it.Outcome == BulkApplied {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(pace):
			}
		}
	}
	return out, nil
}

func (b *BulkRepair) repairOne(ctx context.Context, in BulkBatch, id string) (BulkItem, error) {
	it := BulkItem{WorkflowID: id}
	refuse, err := b.CheckRepair(ctx, id, in.Action)
	switch {
	case err != nil:
		return it, err
	case refuse != "":
		it.Outcome, it.Reason = BulkRefused, refuse
		return it, nil
	case in.DryRun:
		it.Outcome = BulkWouldApply
		return it, nil
	}
	sent, err := b.SignalRepair(ctx, id, RepairRequest{Action: in.Action, RepairID: in.RepairIDPrefix + id, Operator: in.Operator, Reason: in.Reason})
	if err != nil {
		return it, err
	}
	it.Outcome = BulkApplied
	if !sent {
		it.Outcome, it.Reason = BulkSkipped, "the saga is not running any more"
	}
	return it, nil
}
