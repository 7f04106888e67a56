package workflows

import (
	"fmt"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/state"
)

// The options of every workflow start, in one place: the saga starter, the
// gateway, the refund relay and reconciliation start workflows with them.

// SagaStartOptions start the saga of the reservation m serves: its ID comes
// from the reservation, starting it again while it runs finds the running
// one, and a finished saga is never started again by a late duplicate.
func SagaStartOptions(taskQueue string, m events.OrderCreateRequested) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       ReservationWorkflowID(m.ReservationID.String()),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// When the starter runs in the saga worker's process (`seckill worker`),
		// the server hands the first workflow task back with the start's answer
		// instead of through the task queue: one round trip less per saga. With
		// no local worker the option is ignored.
		EnableEagerStart: true,
		// The UI's list and page say what the saga is about without its
		// history (no personal data: the user stays out).
		StaticSummary: fmt.Sprintf("reservation saga: sale %d, SKU %d", m.ActivityID, m.SKUID),
		// Shown on the workflow's page in the UI (not searchable; no personal data).
		Memo: map[string]any{"activity_id": m.ActivityID, "sku_id": m.SKUID, "message_id": m.MessageID.String(),
			"reserved_at": m.ReservedAt, "business_deadline": m.BusinessDeadline},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchReservationStatus.ValueSet(state.SagaReserved.String()),
			SearchActivityID.ValueSet(m.ActivityID),
			SearchSKUID.ValueSet(m.SKUID)),
	}
}

// ResumeStartOptions start a new run of a saga that is gone (terminated,
// failed, completed while its order is still open) with SagaInput.Resume: a
// closed run of the same ID does not stop it; a running one is used as is.
func ResumeStartOptions(taskQueue string, m events.OrderCreateRequested) client.StartWorkflowOptions {
	o := SagaStartOptions(taskQueue, m)
	o.WorkflowIDReusePolicy = enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	o.Memo["resumed"] = true
	return o
}

// RefundStartOptions start the refund of one payment: one workflow per
// payment; a running one is used as is, and one that failed or was
// terminated may be started again (a completed one never: it refunded).
func RefundStartOptions(taskQueue string, in RefundInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       RefundWorkflowID(in.PaymentID.String()),
		TaskQueue:                taskQueue,
		StaticSummary:            fmt.Sprintf("refund of a payment: sale %d, SKU %d", in.ActivityID, in.SKUID),
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SearchReservationStatus.ValueSet(state.SagaRefunding.String()),
			SearchActivityID.ValueSet(in.ActivityID),
			SearchSKUID.ValueSet(in.SKUID)),
	}
}
