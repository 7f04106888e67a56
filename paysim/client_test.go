package paysim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
)

func errorsIsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

func TestClient(t *testing.T) {
	clock := newFakeClock()
	s := newSim(t, Options{Clock: clock.Now})
	m := newMerchant(t, clock.Now, nil)
	ctx := context.Background()
	order := uuid.New()

	if _, err := s.client.FindByOrder(ctx, order); !errors.Is(err, ErrNotFound) || IsRetryable(err) {
		t.Fatalf("find before create: %v", err)
	}
	p, err := s.client.Create(ctx, order, 4999, "CNY", m.url())
	if err != nil || p.Status != StatusPending || p.MerchantOrderID != order || p.AmountCents != 4999 {
		t.Fatalf("create: %+v %v", p, err)
	}
	again, err := s.client.Create(ctx, order, 4999, "CNY", m.url())
	if err != nil || again.TransactionID != p.TransactionID {
		t.Fatalf("create again: %+v %v", again, err)
	}
	_, err = s.client.Create(ctx, order, 1, "CNY", m.url())
	var api *APIError
	if !errors.Is(err, ErrAmountMismatch) || !errors.As(err, &api) || api.Status != 409 || api.Payment == nil || api.Payment.AmountCents != 4999 {
		t.Fatalf("create other amount: %v", err)
	}
	if got, err := s.client.FindByOrder(ctx, order); err != nil || got.TransactionID != p.TransactionID {
		t.Fatalf("find: %+v %v", got, err)
	}
	if _, err := s.client.Get(ctx, "txn_unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := s.client.Refund(ctx, p.TransactionID, "r1", 0); !errors.Is(err, ErrNotPaid) {
		t.Fatalf("refund pending: %v", err)
	}

	paid, err := s.client.Pay(ctx, p.TransactionID, PayOptions{})
	if err != nil || paid.Status != StatusPaid || paid.PaidAt == nil {
		t.Fatalf("pay: %+v %v", paid, err)
	}
	m.next(t)

	// The race: the merchant closes, the provider says it was paid.
	got, err := s.client.Close(ctx, p.TransactionID)
	var ap *AlreadyPaidError
	if !errors.As(err, &ap) || ap.Payment.Status != StatusPaid || ap.Payment.TransactionID != p.TransactionID ||
		got.Status != StatusPaid || !errors.Is(err, ErrAlreadyPaid) || IsRetryable(err) {
		t.Fatalf("close paid: %+v %v", got, err)
	}
	if !errors.As(err, &api) || api.Status != http.StatusConflict || api.Code != CodeAlreadyPaid {
		t.Fatalf("close paid does not unwrap to the APIError: %v", err)
	}

	r, err := s.client.Refund(ctx, p.TransactionID, "r1", 4999)
	if err != nil || r.Status != StatusRefunded || r.RefundID != "r1" {
		t.Fatalf("refund: %+v %v", r, err)
	}
	if r, err = s.client.Refund(ctx, p.TransactionID, "r1", 4999); err != nil || r.Status != StatusRefunded {
		t.Fatalf("refund again: %+v %v", r, err)
	}
	if _, err := s.client.Refund(ctx, p.TransactionID, "r2", 4999); !errors.Is(err, ErrAlreadyRefunded) {
		t.Fatalf("refund other id: %v", err)
	}

	q, _ := s.client.Create(ctx, uuid.New(), 10, "CNY", m.url())
	if c, err := s.client.Close(ctx, q.TransactionID); err != nil || c.Status != StatusClosed {
		t.Fatalf("close: %+v %v", c, err)
	}
	if c, err := s.client.Close(ctx, q.TransactionID); err != nil || c.Status != StatusClosed {
		t.Fatalf("close again: %+v %v", c, err)
	}
	if _, err := s.client.Pay(ctx, q.TransactionID, PayOptions{}); !errors.Is(err, ErrPaymentClosed) || IsRetryable(err) {
		t.Fatalf("pay closed: %v", err)
	}

	st, err := s.client.Stats(ctx)
	if err != nil || st.Payments[StatusRefunded] != 1 || st.Payments[StatusClosed] != 1 {
		t.Fatalf("stats: %+v %v", st, err)
	}

	bad := &Client{BaseURL: s.ts.URL, MerchantKey: "wrong", HTTP: s.ts.Client()}
	if _, err := bad.Get(ctx, p.TransactionID); !errors.Is(err, ErrUnauthorized) || IsRetryable(err) {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestIsRetryable(t *testing.T) {
	ctx := context.Background()

	// 5xx and 429 from a provider without a JSON body.
	for _, code := range []int{500, 502, 503, 429} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", code)
		}))
		c := &Client{BaseURL: ts.URL, MerchantKey: testKey, HTTP: ts.Client()}
		_, err := c.Get(ctx, "txn_x")
		var api *APIError
		if !IsRetryable(err) || !errors.As(err, &api) || api.Status != code {
			t.Errorf("HTTP %d: %v, want retryable APIError", code, err)
		}
		ts.Close()
	}

	// Nothing listening: a network error, retryable.
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	c := &Client{BaseURL: url, MerchantKey: testKey}
	_, err := c.Get(ctx, "txn_x")
	var ne *NetworkError
	if !errors.As(err, &ne) || !IsRetryable(err) {
		t.Errorf("connection refused: %v, want retryable NetworkError", err)
	}

	// A timeout is retryable (outcome unknown); the caller's cancel is not.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	c = &Client{BaseURL: slow.URL, MerchantKey: testKey, HTTP: &http.Client{Timeout: 20 * time.Millisecond}}
	if _, err := c.Get(ctx, "txn_x"); !IsRetryable(err) {
		t.Errorf("timeout: %v, want retryable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c = &Client{BaseURL: slow.URL, MerchantKey: testKey, HTTP: slow.Client()}
	if _, err := c.Get(cctx, "txn_x"); err == nil || IsRetryable(err) {
		t.Errorf("canceled: %v, want not retryable", err)
	}

	if IsRetryable(nil) || IsRetryable(errors.New("other")) || IsRetryable(&APIError{Status: 409}) {
		t.Error("nil, plain errors and 4xx must not be retryable")
	}
}
