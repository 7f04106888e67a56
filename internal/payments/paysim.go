package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/paysim"
)

// PaysimProvider adapts the provider simulator's client to Provider.
type PaysimProvider struct {
	Client *paysim.Client
}

var _ Provider = PaysimProvider{}

// ProviderName is the provider name recorded in payment_record.
const ProviderName = "paysim"

// Name implements Provider.
func (PaysimProvider) Name() string { return ProviderName }

func fromPaysim(p paysim.Payment) ProviderPayment {
	out := ProviderPayment{TransactionID: p.TransactionID, OrderID: p.MerchantOrderID, AmountCents: p.AmountCents,
		Currency: p.Currency, Status: ProviderStatus(p.Status)}
	if p.PaidAt != nil {
		out.PaidAt = p.PaidAt.UTC()
	}
	return out
}

// Create implements Provider.
func (a PaysimProvider) Create(ctx context.Context, orderID uuid.UUID, amountCents int64, currency, callbackURL string) (ProviderPayment, error) {
	p, err := a.Client.Create(ctx, orderID, amountCents, currency, callbackURL)
	return fromPaysim(p), err
}

// FindByOrder implements Provider.
func (a PaysimProvider) FindByOrder(ctx context.Context, orderID uuid.UUID) (ProviderPayment, error) {
	p, err := a.Client.FindByOrder(ctx, orderID)
	if errors.Is(err, paysim.ErrNotFound) {
		return ProviderPayment{}, ErrNoPayment
	}
	return fromPaysim(p), err
}

// Get implements Provider.
func (a PaysimProvider) Get(ctx context.Context, transactionID string) (ProviderPayment, error) {
	p, err := a.Client.Get(ctx, transactionID)
	if errors.Is(err, paysim.ErrNotFound) {
		return ProviderPayment{}, ErrNoPayment
	}
	return fromPaysim(p), err
}

// Close implements Provider.
func (a PaysimProvider) Close(ctx context.Context, transactionID string) (ProviderPayment, error) {
	p, err := a.Client.Close(ctx, transactionID)
	var paid *paysim.AlreadyPaidError
	if errors.As(err, &paid) {
		return fromPaysim(paid.Payment), &AlreadyPaidError{Payment: fromPaysim(paid.Payment)}
	}
	return fromPaysim(p), err
}

// Refund implements Provider.
func (a PaysimProvider) Refund(ctx context.Context, transactionID, refundID string, amountCents int64) (ProviderPayment, error) {
	p, err := a.Client.Refund(ctx, transactionID, refundID, amountCents)
	for _, refusal := range []error{paysim.ErrNotFound, paysim.ErrAlreadyRefunded, paysim.ErrNotPaid, paysim.ErrAmountMismatch, paysim.ErrBadRequest} {
		if errors.Is(err, refusal) {
			return fromPaysim(p), fmt.Errorf("%w: %w", ErrRefundRefused, err)
		}
	}
	return fromPaysim(p), err
}

// PaysimVerifier checks the simulator's Standard Webhooks signatures with a
// timestamp tolerance.
func PaysimVerifier(secret []byte, tolerance time.Duration) func(id, ts, sig string, body []byte, now time.Time) error {
	return func(id, ts, sig string, body []byte, now time.Time) error {
		return paysim.Verify(secret, id, ts, sig, body, now, tolerance)
	}
}
