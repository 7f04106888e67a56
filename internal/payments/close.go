package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
)

// CloseOutcome is what closing an order's payment at the provider found.
type CloseOutcome string

// Close outcomes.
const (
	CloseClosed    CloseOutcome = "CLOSED"     // the provider closed the unpaid payment
	CloseNoPayment CloseOutcome = "NO_PAYMENT" // the provider never saw a payment for the order
	ClosePaid      CloseOutcome = "PAID"       // the provider says it was paid: record it, never cancel
)

// CloseResult is what the provider said when asked to close.
type CloseResult struct {
	Outcome  CloseOutcome
	Evidence Evidence
}

// CloseAt asks the provider about the order's payment (query, then close).
// It runs outside any transaction; retries are safe (the provider is
// idempotent). A payment that was paid meanwhile is ClosePaid with its evidence.
func CloseAt(ctx context.Context, p Provider, orderID uuid.UUID, log *slog.Logger) (CloseResult, error) {
	pay, err := p.FindByOrder(ctx, orderID)
	if errors.Is(err, ErrNoPayment) {
		return CloseResult{Outcome: CloseNoPayment}, nil
	}
	if err != nil {
		return CloseResult{}, fmt.Errorf("query provider for %s: %w", orderID, err)
	}
	switch pay.Status {
	case ProviderPaid:
		return CloseResult{Outcome: ClosePaid, Evidence: pay.Evidence(p.Name())}, nil
	case ProviderClosed, ProviderRefunded:
		return CloseResult{Outcome: CloseClosed}, nil
	}
	closed, err := p.Close(ctx, pay.TransactionID)
	var paid *AlreadyPaidError
	if errors.As(err, &paid) {
		log.WarnContext(ctx, "payment.cancel_race_detected", "order_id", orderID, "transaction_id", pay.TransactionID)
		return CloseResult{Outcome: ClosePaid, Evidence: paid.Payment.Evidence(p.Name())}, nil
	}
	if err != nil {
		return CloseResult{}, fmt.Errorf("close payment %s: %w", pay.TransactionID, err)
	}
	if closed.Status == ProviderPaid {
		return CloseResult{Outcome: ClosePaid, Evidence: closed.Evidence(p.Name())}, nil
	}
	return CloseResult{Outcome: CloseClosed}, nil
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
