package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

func (a *Activities) payments() (*payments.Store, error) {
	if a.pay == nil || a.provider == nil {
		return nil, errors.New("activities: no payment provider configured")
	}
	return a.pay, nil
}

// OrderStatus reads an order's status from PostgreSQL (a payment signal is a
// hint; the row is the fact).
func (a *Activities) OrderStatus(ctx context.Context, orderID uuid.UUID) (state.Order, error) {
	return a.pay.Status(ctx, orderID)
}

// CancelInput asks to start cancelling an order.
type CancelInput struct {
	OrderID uuid.UUID
	// RequireExpired: the expiry path cancels only once expires_at passed.
	RequireExpired bool
}

// BeginCancel moves the order to CANCEL_PENDING (or reports where it is,
// or state.CancelPaymentStarting while a payment is being started).
func (a *Activities) BeginCancel(ctx context.Context, in CancelInput) (state.Cancel, error) {
	st, err := a.payments()
	if err != nil {
		return state.Cancel{}, err
	}
	return st.BeginCancel(ctx, in.OrderID, in.RequireExpired)
}

// CloseAtProvider asks the provider about the order's payment (query, then
// close; payments.CloseAt). It runs outside any transaction; retries are safe.
func (a *Activities) CloseAtProvider(ctx context.Context, orderID uuid.UUID) (steps.CloseResult, error) {
	if _, err := a.payments(); err != nil {
		return steps.CloseResult{}, err
	}
	return payments.CloseAt(ctx, a.provider, orderID, a.log)
}

// RecordPayment records provider evidence (the same transaction the callback runs).
func (a *Activities) RecordPayment(ctx context.Context, ev steps.Evidence) (steps.RecordResult, error) {
	st, err := a.payments()
	if err != nil {
		return steps.RecordResult{}, err
	}
	res, err := st.Record(ctx, ev)
	if err == nil {
		a.m.Payment.WithLabelValues(strings.ToLower(string(res.Outcome))).Inc()
	}
	return res, err
}

// FinalCancel cancels a CANCEL_PENDING order with no successful payment.
func (a *Activities) FinalCancel(ctx context.Context, orderID uuid.UUID) (state.Order, error) {
	st, err := a.payments()
	if err != nil {
		return state.Order{}, err
	}
	status, err := st.FinalCancel(ctx, orderID)
	if err == nil {
		a.m.Cancel.WithLabelValues(map[bool]string{true: "cancelled", false: "paid_won"}[status == state.OrderCancelled]).Inc()
	}
	return status, err
}

// BeginRefund moves a payment of a cancelled order to REFUNDING.
func (a *Activities) BeginRefund(ctx context.Context, paymentID uuid.UUID) (steps.Refund, error) {
	st, err := a.payments()
	if err != nil {
		return steps.Refund{}, err
	}
	r, _, err := st.BeginRefund(ctx, paymentID)
	return r, refused(err, payments.ErrNotRefundable)
}

// HoldRefundInput names a refund refused for good, and why.
type HoldRefundInput struct {
	PaymentID uuid.UUID
	Reason    string
}

// HoldRefund marks a refund refused for good MANUAL (payments.Store.HoldRefund).
func (a *Activities) HoldRefund(ctx context.Context, in HoldRefundInput) error {
	st, err := a.payments()
	if err != nil {
		return err
	}
	return st.HoldRefund(ctx, in.PaymentID, in.Reason)
}

// RefundAtProvider refunds at the provider with the payment's fixed refund id.
func (a *Activities) RefundAtProvider(ctx context.Context, r steps.Refund) error {
	if _, err := a.payments(); err != nil {
		return err
	}
	if _, err := a.provider.Refund(ctx, r.TransactionID, payments.RefundID(r.PaymentID), r.AmountCents); err != nil {
		return refused(fmt.Errorf("refund %s at provider: %w", r.TransactionID, err), payments.ErrRefundRefused)
	}
	return nil
}

// FinishRefund records the refund in PostgreSQL.
func (a *Activities) FinishRefund(ctx context.Context, r steps.Refund) error {
	st, err := a.payments()
	if err != nil {
		return err
	}
	if err := st.FinishRefund(ctx, r); err != nil {
		return err
	}
	a.m.Refund.Inc()
	return nil
}

// QueryProvider asks the provider about the order's payment without changing
// anything there.
func (a *Activities) QueryProvider(ctx context.Context, orderID uuid.UUID) (payments.ProviderState, error) {
	if _, err := a.payments(); err != nil {
		return payments.ProviderState{}, err
	}
	return payments.QueryAt(ctx, a.provider, orderID)
}

// PaymentStore is the payment store a uses (a function for the same reason).
func PaymentStore(a *Activities) *payments.Store { return a.pay }
