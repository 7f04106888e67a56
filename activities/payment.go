package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/lua"
)

func (a *Activities) payments() (*payments.Store, error) {
	if a.pay == nil || a.provider == nil {
		return nil, errors.New("activities: no payment provider configured")
	}
	return a.pay, nil
}

// OrderStatus reads an order's status from PostgreSQL (a payment signal is a
// hint; the row is the fact).
func (a *Activities) OrderStatus(ctx context.Context, orderID uuid.UUID) (string, error) {
	return payments.NewStore(a.pool, a.fp).Status(ctx, orderID)
}

// CancelInput asks to start cancelling an order.
type CancelInput struct {
	OrderID uuid.UUID
	// RequireExpired: the expiry path cancels only once expires_at passed.
	RequireExpired bool
}

// BeginCancel moves the order to CANCEL_PENDING (or reports where it is).
func (a *Activities) BeginCancel(ctx context.Context, in CancelInput) (string, error) {
	st, err := a.payments()
	if err != nil {
		return "", err
	}
	return st.BeginCancel(ctx, in.OrderID, in.RequireExpired)
}

// Close outcomes.
const (
	CloseClosed    = "CLOSED"     // the provider closed the unpaid payment
	CloseNoPayment = "NO_PAYMENT" // the provider never saw a payment for the order
	ClosePaid      = "PAID"       // the provider says it was paid: record it, never cancel
)

// CloseResult is what the provider said when asked to close.
type CloseResult struct {
	Outcome  string
	Evidence payments.Evidence
}

// CloseAtProvider asks the provider about the order's payment (query, then
// close). It runs outside any transaction; retries are safe (idempotent).
func (a *Activities) CloseAtProvider(ctx context.Context, orderID uuid.UUID) (CloseResult, error) {
	if _, err := a.payments(); err != nil {
		return CloseResult{}, err
	}
	p, err := a.provider.FindByOrder(ctx, orderID)
	if errors.Is(err, payments.ErrNoPayment) {
		return CloseResult{Outcome: CloseNoPayment}, nil
	}
	if err != nil {
		return CloseResult{}, fmt.Errorf("query provider for %s: %w", orderID, err)
	}
	switch p.Status {
	case "PAID":
		return CloseResult{Outcome: ClosePaid, Evidence: p.Evidence(a.provider.Name())}, nil
	case "CLOSED", "REFUNDED":
		return CloseResult{Outcome: CloseClosed}, nil
	}
	closed, err := a.provider.Close(ctx, p.TransactionID)
	var paid *payments.AlreadyPaidError
	if errors.As(err, &paid) {
		a.log.Warn("payment.cancel_race_detected", "order_id", orderID, "transaction_id", p.TransactionID)
		return CloseResult{Outcome: ClosePaid, Evidence: paid.Payment.Evidence(a.provider.Name())}, nil
	}
	if err != nil {
		return CloseResult{}, fmt.Errorf("close payment %s: %w", p.TransactionID, err)
	}
	if closed.Status == "PAID" {
		return CloseResult{Outcome: ClosePaid, Evidence: closed.Evidence(a.provider.Name())}, nil
	}
	return CloseResult{Outcome: CloseClosed}, nil
}

// RecordPayment records provider evidence (the same transaction the callback runs).
func (a *Activities) RecordPayment(ctx context.Context, ev payments.Evidence) (payments.RecordResult, error) {
	st, err := a.payments()
	if err != nil {
		return payments.RecordResult{}, err
	}
	res, err := st.Record(ctx, ev)
	if err == nil {
		a.m.Payment.WithLabelValues(strings.ToLower(string(res.Outcome))).Inc()
	}
	return res, err
}

// FinalCancel cancels a CANCEL_PENDING order with no successful payment.
func (a *Activities) FinalCancel(ctx context.Context, orderID uuid.UUID) (string, error) {
	st, err := a.payments()
	if err != nil {
		return "", err
	}
	status, err := st.FinalCancel(ctx, orderID)
	if err == nil {
		a.m.Cancel.WithLabelValues(map[bool]string{true: "cancelled", false: "paid_won"}[status == payments.StatusCancelled]).Inc()
	}
	return status, err
}

// ReleaseInput names a cancelled order whose Redis unit is given back.
type ReleaseInput struct {
	ReservationID uuid.UUID
	OrderID       uuid.UUID
	ActivityID    int64
	SKUID         int64
}

// ReleaseRedis gives a cancelled order's unit back to Redis stock once
// (lua/release.lua). Only after PostgreSQL durably cancelled the order.
func (a *Activities) ReleaseRedis(ctx context.Context, in ReleaseInput) (ProjectionResult, error) {
	k := lua.Keys{ActivityID: in.ActivityID, SKUID: in.SKUID}
	rid := in.ReservationID.String()
	reply, err := lua.Release(ctx, a.rdb, k, lua.ReleaseArgs{ReservationID: rid, ReleaseID: "RELEASE:" + in.OrderID.String(),
		NowMS: time.Now().UnixMilli(), TTL: a.TerminalTTL})
	if err != nil {
		return ProjectionResult{}, err
	}
	res := ProjectionResult{Code: int64(reply.Code), Text: reply.Text}
	if res.Code < 0 {
		a.log.Error("release.redis_not_applied", "reservation_id", rid, "order_id", in.OrderID, "lua_code", res.Code, "result", res.Text)
	}
	return res, nil
}

// BeginRefund moves a payment of a cancelled order to REFUNDING.
func (a *Activities) BeginRefund(ctx context.Context, paymentID uuid.UUID) (payments.Refund, error) {
	st, err := a.payments()
	if err != nil {
		return payments.Refund{}, err
	}
	r, _, err := st.BeginRefund(ctx, paymentID)
	return r, err
}

// RefundAtProvider refunds at the provider with the payment's fixed refund id.
func (a *Activities) RefundAtProvider(ctx context.Context, r payments.Refund) error {
	if _, err := a.payments(); err != nil {
		return err
	}
	if _, err := a.provider.Refund(ctx, r.TransactionID, payments.RefundID(r.PaymentID), r.AmountCents); err != nil {
		return fmt.Errorf("refund %s at provider: %w", r.TransactionID, err)
	}
	return nil
}

// FinishRefund records the refund in PostgreSQL.
func (a *Activities) FinishRefund(ctx context.Context, r payments.Refund) error {
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

// ProviderState is what the provider says of an order's payment.
type ProviderState struct {
	// Found is false when the provider holds no payment for the order.
	Found   bool
	Payment payments.ProviderPayment
}

// QueryProvider asks the provider about the order's payment without changing
// anything there.
func (a *Activities) QueryProvider(ctx context.Context, orderID uuid.UUID) (ProviderState, error) {
	if _, err := a.payments(); err != nil {
		return ProviderState{}, err
	}
	p, err := a.provider.FindByOrder(ctx, orderID)
	if errors.Is(err, payments.ErrNoPayment) {
		return ProviderState{}, nil
	}
	if err != nil {
		return ProviderState{}, fmt.Errorf("query provider for %s: %w", orderID, err)
	}
	return ProviderState{Found: true, Payment: p}, nil
}

// ProviderName is the name a's provider's payments are recorded under ("":
// no provider). A function, not a method: every method of Activities is an
// activity.
func ProviderName(a *Activities) string {
	if a.provider == nil {
		return ""
	}
	return a.provider.Name()
}

// PaymentStore is the payment store a uses (a function for the same reason).
func PaymentStore(a *Activities) *payments.Store { return a.pay }
