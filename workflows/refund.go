package workflows

import (
	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// RefundInput names a payment that landed after its order was cancelled.
type RefundInput struct {
	PaymentID  uuid.UUID
	ActivityID int64
	SKUID      int64
}

// RefundWorkflow gives back a payment that arrived after its order was
// cancelled (docs/spec.md#payment-vs-cancel): REFUNDING in PostgreSQL, refund at the provider with
// the payment's fixed refund id, REFUNDED. Visible in the UI by
// ReservationStatus = "REFUNDING" / "REFUNDED".
func RefundWorkflow(ctx workflow.Context, in RefundInput) (state.Saga, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchActivityID.ValueSet(in.ActivityID),
		SearchSKUID.ValueSet(in.SKUID), SearchReservationStatus.ValueSet(state.SagaRefunding.String())); err != nil {
		return state.Saga{}, err
	}
	var r steps.Refund
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.BeginRefund, in.PaymentID).Get(ctx, &r); err != nil {
		return state.Saga{}, holdRefund(ctx, in, err)
	}
	if err := workflow.ExecuteActivity(providerActivity(ctx), act.RefundAtProvider, r).Get(ctx, nil); err != nil {
		return state.Saga{}, holdRefund(ctx, in, err)
	}
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.FinishRefund, r).Get(ctx, nil); err != nil {
		return state.Saga{}, err
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchReservationStatus.ValueSet(state.SagaRefunded.String())); err != nil {
		return state.Saga{}, err
	}
	return state.SagaRefunded, nil
}

// holdRefund handles a refund step's failure: one that failed for good (the
// payment is not one to give back, the provider refused the refund) takes
// the refund out of the relay's hands (HoldRefund: refund_task MANUAL with
// the reason), shows MANUAL_REVIEW and fails the run, so that once a person
// has fixed the cause and made the task PENDING again the relay can start a
// new run (docs/operations.md#refund-backlog). Any other error is returned
// as it is.
func holdRefund(ctx workflow.Context, in RefundInput, err error) error {
	if _, ok := permanent(err); !ok || workflow.GetVersion(ctx, versionPermanentBranches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return err
	}
	if herr := workflow.ExecuteActivity(dbActivity(ctx), act.HoldRefund, activities.HoldRefundInput{
		PaymentID: in.PaymentID, Reason: err.Error()}).Get(ctx, nil); herr != nil {
		return herr
	}
	if uerr := workflow.UpsertTypedSearchAttributes(ctx, SearchReservationStatus.ValueSet(state.SagaManual.String())); uerr != nil {
		workflow.GetLogger(ctx).Error("upsert search attribute", "error", uerr)
	}
	return err
}
