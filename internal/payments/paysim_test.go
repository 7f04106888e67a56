package payments

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/paysim"
)

// inProcessPaysim is a PaysimProvider on the simulator served in this
// process (httptest): no service of the stack.
func inProcessPaysim(t *testing.T) (PaysimProvider, *paysim.Client, func()) {
	t.Helper()
	srv, err := paysim.New(paysim.Options{Secret: []byte("test-secret"), MerchantKey: "test-key", CallbackTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	stop := func() { srv.Close(); ts.Close() }
	t.Cleanup(stop)
	c := &paysim.Client{BaseURL: ts.URL, MerchantKey: "test-key", HTTP: ts.Client()}
	return PaysimProvider{Client: c}, c, stop
}

func TestPaysimProvider(t *testing.T) {
	p, c, stop := inProcessPaysim(t)
	ctx, order := context.Background(), uuid.New()
	if p.Name() != ProviderName {
		t.Errorf("Name = %q, want %q", p.Name(), ProviderName)
	}
	if _, err := p.FindByOrder(ctx, order); !errors.Is(err, ErrNoPayment) {
		t.Fatalf("FindByOrder before Create: %v, want ErrNoPayment", err)
	}
	if _, err := p.Get(ctx, "txn_unknown"); !errors.Is(err, ErrNoPayment) {
		t.Fatalf("Get unknown: %v, want ErrNoPayment", err)
	}
	created, err := p.Create(ctx, order, 4999, "CNY", "http://127.0.0.1:1/callback")
	if err != nil || created.OrderID != order || created.AmountCents != 4999 || created.Status != ProviderPending ||
		created.TransactionID == "" || !created.PaidAt.IsZero() {
		t.Fatalf("Create = %+v, %v", created, err)
	}
	if _, err := p.Refund(ctx, created.TransactionID, "r1", 4999); !errors.Is(err, ErrRefundRefused) {
		t.Errorf("Refund of an unpaid payment: %v, want ErrRefundRefused", err)
	}
	if _, err := p.Refund(ctx, "txn_unknown", "r2", 4999); !errors.Is(err, ErrRefundRefused) {
		t.Errorf("Refund of an unknown payment: %v, want ErrRefundRefused", err)
	}
	if _, err := c.Pay(ctx, created.TransactionID, paysim.PayOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, created.TransactionID)
	if err != nil || got.Status != ProviderPaid || got.PaidAt.IsZero() || got.PaidAt.Location() != time.UTC {
		t.Fatalf("Get paid = %+v, %v; want PAID with a UTC paid_at", got, err)
	}
	closed, err := p.Close(ctx, created.TransactionID)
	var paid *AlreadyPaidError
	if !errors.As(err, &paid) || paid.Payment.TransactionID != created.TransactionID || paid.Payment.Status != ProviderPaid ||
		closed.Status != ProviderPaid {
		t.Fatalf("Close of a paid payment = %+v, %v; want *AlreadyPaidError", closed, err)
	}
	if _, err := p.Refund(ctx, created.TransactionID, "r3", 1); !errors.Is(err, ErrRefundRefused) {
		t.Errorf("Refund of another amount: %v, want ErrRefundRefused", err)
	}
	if r, err := p.Refund(ctx, created.TransactionID, "r4", 4999); err != nil || r.Status != ProviderRefunded {
		t.Errorf("Refund = %+v, %v; want REFUNDED", r, err)
	}
	stop()
	if _, err := p.Refund(ctx, created.TransactionID, "r5", 4999); err == nil || errors.Is(err, ErrRefundRefused) {
		t.Errorf("Refund with the provider down: %v, want a retryable error, not ErrRefundRefused", err)
	}
}

func TestFromPaysim(t *testing.T) {
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.FixedZone("X", 7200))
	order := uuid.New()
	got := fromPaysim(paysim.Payment{TransactionID: "t", MerchantOrderID: order, AmountCents: 5, Status: paysim.StatusPaid, PaidAt: &at})
	want := ProviderPayment{TransactionID: "t", OrderID: order, AmountCents: 5, Status: ProviderPaid, PaidAt: at.UTC()}
	if got != want || got.PaidAt.Location() != time.UTC {
		t.Errorf("fromPaysim = %+v, want %+v", got, want)
	}
	if got := fromPaysim(paysim.Payment{Status: paysim.StatusPending}); !got.PaidAt.IsZero() || got.Status != ProviderPending {
		t.Errorf("fromPaysim(pending) = %+v", got)
	}
}
