package sagastarter

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/workflows"
)

// Control finds, resumes and notifies reservation sagas: what reconciliation
// needs of Temporal (internal/reconcile.Sagas).
type Control struct {
	tc        client.Client
	taskQueue string
}

// NewControl returns a Control; both arguments are required.
func NewControl(tc client.Client, taskQueue string) (*Control, error) {
	if tc == nil || taskQueue == "" {
		return nil, errors.New("sagastarter: nil client or empty task queue")
	}
	return &Control{tc: tc, taskQueue: taskQueue}, nil
}

// Running reports whether the reservation's saga runs, and its latest run id.
func (c *Control) Running(ctx context.Context, rid uuid.UUID) (bool, string, error) {
	d, err := c.tc.DescribeWorkflowExecution(ctx, workflows.ReservationWorkflowID(rid.String()), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("describe saga of %s: %w", rid, err)
	}
	info := d.GetWorkflowExecutionInfo()
	return info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING, info.GetExecution().GetRunId(), nil
}

// Resume starts a new run of the reservation's saga that carries on from
// PostgreSQL; a run that is already running is left as it is.
func (c *Control) Resume(ctx context.Context, m events.OrderCreateRequested) error {
	return workflows.ResumeSaga(ctx, c.tc, c.taskQueue, m)
}

// NotifyPaid signals the saga that its order was paid; a saga that is not
// running needs no telling.
func (c *Control) NotifyPaid(ctx context.Context, rid uuid.UUID, transactionID string) error {
	err := c.tc.SignalWorkflow(ctx, workflows.ReservationWorkflowID(rid.String()), "", workflows.SignalPayment,
		workflows.PaymentSignal{TransactionID: transactionID})
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("signal saga of %s: %w", rid, err)
	}
	return nil
}
