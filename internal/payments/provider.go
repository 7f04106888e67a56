package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/state/steps"
)

// ProviderPayment is a payment as the provider sees it.
type ProviderPayment struct {
	TransactionID string
	OrderID       uuid.UUID
	AmountCents   int64
	Currency      string // ISO 4217
	Status        ProviderStatus
	PaidAt        time.Time
}

// DefaultCurrency is a sale's currency when its definition names none.
const DefaultCurrency = "CNY"

// IsCurrency reports whether c has the form of an ISO 4217 alphabetic code:
// three capital letters (whether the code is assigned is not checked). The
// same rule is the CHECK of the currency columns (migrations/00016).
func IsCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range 3 {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// ProviderStatus is a payment's status at the provider.
type ProviderStatus string

// Statuses a provider reports.
const (
	ProviderPending  ProviderStatus = "PENDING"
	ProviderPaid     ProviderStatus = "PAID"
	ProviderClosed   ProviderStatus = "CLOSED"
	ProviderRefunded ProviderStatus = "REFUNDED"
)

// ErrNoPayment means the provider holds no payment for the order.
var ErrNoPayment = errors.New("provider has no payment for this order")

// ErrRefundRefused means the provider refused a refund for good (no such
// payment, another refund already made, not paid, a bad amount): retrying the
// same refund cannot pass.
var ErrRefundRefused = errors.New("provider refused the refund")

// AlreadyPaidError is the provider's answer to closing a payment that was
// paid meanwhile: the race the CANCEL_PENDING state exists for.
type AlreadyPaidError struct{ Payment ProviderPayment }

func (e *AlreadyPaidError) Error() string {
	return fmt.Sprintf("payment %s of order %s is already paid", e.Payment.TransactionID, e.Payment.OrderID)
}

// Provider is the payment provider as the merchant uses it. Every call is
// idempotent on the provider's side (by order id, transaction id or refund id).
type Provider interface {
	// Name is the provider's name in payment_record.provider.
	Name() string
	// Create opens the order's payment of amountCents in currency (ISO 4217).
	Create(ctx context.Context, orderID uuid.UUID, amountCents int64, currency, callbackURL string) (ProviderPayment, error)
	// FindByOrder returns ErrNoPayment when the order has none.
	FindByOrder(ctx context.Context, orderID uuid.UUID) (ProviderPayment, error)
	// Get returns a transaction by id (ErrNoPayment when the provider has no such one).
	Get(ctx context.Context, transactionID string) (ProviderPayment, error)
	// Close returns *AlreadyPaidError when the payment was paid.
	Close(ctx context.Context, transactionID string) (ProviderPayment, error)
	Refund(ctx context.Context, transactionID, refundID string, amountCents int64) (ProviderPayment, error)
}

// Evidence turns a paid provider payment into payment evidence.
func (p ProviderPayment) Evidence(provider string) steps.Evidence {
	return steps.Evidence{OrderID: p.OrderID, Provider: provider, TransactionID: p.TransactionID, AmountCents: p.AmountCents,
		Currency: p.Currency, PaidAt: p.PaidAt}
}
