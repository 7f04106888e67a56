package sagastarter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/seckill/seckill/internal/explain"
	"github.com/seckill/seckill/workflows"
)

// Describe tells what Temporal knows of the reservation's saga: its latest
// run's status, its current step (the saga's current details, asked of a
// worker; empty when none answers within two seconds) and the activities it
// waits for with their attempt and last failure.
func (c *Control) Describe(ctx context.Context, rid uuid.UUID) (explain.Saga, error) {
	id := workflows.ReservationWorkflowID(rid.String())
	s := explain.Saga{WorkflowID: id}
	d, err := c.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		s.Status = "NOT_FOUND"
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("describe saga of %s: %w", rid, err)
	}
	info := d.GetWorkflowExecutionInfo()
	s.RunID = info.GetExecution().GetRunId()
	s.Status = strings.ToUpper(strings.TrimPrefix(info.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_"))
	for _, p := range d.GetPendingActivities() {
		s.Pending = append(s.Pending, explain.Pending{Activity: p.GetActivityType().GetName(), Attempt: p.GetAttempt(),
			LastFailure: p.GetLastFailure().GetMessage()})
	}
	if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		s.Step = c.currentStep(ctx, id, s.RunID)
	}
	return s, nil
}

// currentStep asks a worker for the saga's current details ("" if none answers).
func (c *Control) currentStep(ctx context.Context, id, runID string) string {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.tc.QueryWorkflow(qctx, id, runID, "__temporal_workflow_metadata")
	if err != nil {
		return ""
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		return ""
	}
	return md.GetCurrentDetails()
}
