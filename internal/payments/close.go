package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/seckill/seckill/state/steps"
)

// CloseAt asks the provider about the order's payment (query, then close).
// It runs outside any transaction; retries are safe (the provider is
// idempotent). A payment that was paid meanwhile is ClosePaid with its evidence.
func CloseAt(ctx context.Context, p Provider, orderID uuid.UUID, log *slog.Logger) (steps.CloseResult, error) {
	pay, err := p.FindByOrder(ctx, orderID)
	if errors.Is(err, ErrNoPayment) {
		return steps.CloseResult{Outcome: steps.CloseNoPayment}, nil
	}
	if err != nil {
		return steps.CloseResult{}, fmt.Errorf("query provider for %s: %w", orderID, err)
	}
	switch pay.Status {
	case ProviderPaid:
		return steps.CloseResult{Outcome: steps.ClosePaid, Evidence: pay.Evidence(p.Name())}, nil
	case ProviderClosed, ProviderRefunded:
		return steps.CloseResult{Outcome: steps.CloseClosed}, nil
	}
	closed, err := p.Close(ctx, pay.TransactionID)
	var paid *AlreadyPaidError
	if errors.As(err, &paid) {
		log.WarnContext(ctx, "payment.cancel_race_detected", "order_id", orderID, "transaction_id", pay.TransactionID)
		return steps.CloseResult{Outcome: steps.ClosePaid, Evidence: paid.Payment.Evidence(p.Name())}, nil
	}
	if err != nil {
		return steps.CloseResult{}, fmt.Errorf("close payment %s: %w", pay.TransactionID, err)
	}
	if closed.Status == ProviderPaid {
		return steps.CloseResult{Outcome: steps.ClosePaid, Evidence: closed.Evidence(p.Name())}, nil
	}
	return steps.CloseResult{Outcome: steps.CloseClosed}, nil
}

// ProviderState is what the provider says of an order's payment.
type ProviderState struct {
	// Found is false when the provider holds no payment for the order.
	Found   bool
	Payment ProviderPayment
}

// QueryAt asks the provider about the order's payment without changing
// anything there.
func QueryAt(ctx context.Context, p Provider, orderID uuid.UUID) (ProviderState, error) {
	pay, err := p.FindByOrder(ctx, orderID)
	if errors.Is(err, ErrNoPayment) {
		return ProviderState{}, nil
	}
	if err != nil {
		return ProviderState{}, fmt.Errorf("query provider for %s: %w", orderID, err)
	}
	return ProviderState{Found: true, Payment: pay}, nil
}
