package workflows

import (
	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
)

// RefundInput names a payment that landed after its order was cancelled.
type RefundInput struct {
	PaymentID  uuid.UUID
	ActivityID int64
	SKUID      int64
}

// RefundWorkflow gives back a payment that arrived after its order was
// cancelled (seed §9.9): REFUNDING in PostgreSQL, refund at the provider with
// the payment's fixed refund id, REFUNDED. Visible in the UI by
// ReservationStatus = "REFUNDING" / "REFUNDED".
func RefundWorkflow(ctx workflow.Context, in RefundInput) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchActivityID.ValueSet(in.ActivityID),
		SearchSKUID.ValueSet(in.SKUID), SearchReservationStatus.ValueSet(StatusRefunding)); err != nil {
		return "", err
	}
	var r activities.Refund
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.BeginRefund, in.PaymentID).Get(ctx, &r); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(providerActivity(ctx), act.RefundAtProvider, r).Get(ctx, nil); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.FinishRefund, r).Get(ctx, nil); err != nil {
		return "", err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchReservationStatus.ValueSet(StatusRefunded)); err != nil {
		return "", err
	}
	return StatusRefunded, nil
}
