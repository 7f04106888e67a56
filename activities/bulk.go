package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
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
