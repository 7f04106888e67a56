package checkout

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
)

// getProvider is a payments.Provider whose Get is scripted; a callback
// refused before PostgreSQL calls nothing else.
type getProvider struct {
	payments.Provider // nil: any other call panics
	get               func(string) (payments.ProviderPayment, error)
	gets              int
}

func (p *getProvider) Name() string { return "fake" }
func (p *getProvider) Get(_ context.Context, txn string) (payments.ProviderPayment, error) {
	p.gets++
	return p.get(txn)
}

// callbackService is a Service without PostgreSQL or sagas: enough for the
// verdicts HandleCallback reaches before its transaction.
func callbackService(p payments.Provider, verify Verifier) *Service {
	return &Service{provider: p, verify: verify, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: time.Now, m: metrics.NewSaga(prometheus.NewRegistry()),
		seen: func(context.Context, string, []byte) (int, error) { return callbackNew, nil }}
}

func callbackBody(t *testing.T, cb CallbackBody) []byte {
	t.Helper()
	b, err := json.Marshal(cb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandleCallbackRefusals(t *testing.T) {
	order := uuid.New()
	good := CallbackBody{Type: "payment.succeeded", EventID: "evt_1", TransactionID: "txn_1", MerchantOrderID: order, AmountCents: 4999,
		Currency: "CNY", PaidAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	paid := payments.ProviderPayment{TransactionID: "txn_1", OrderID: order, AmountCents: 4999, Currency: "CNY", Status: payments.ProviderPaid}
	with := func(f func(*CallbackBody)) CallbackBody { cb := good; f(&cb); return cb }
	at := func(p payments.ProviderPayment, err error) func(string) (payments.ProviderPayment, error) {
		return func(string) (payments.ProviderPayment, error) { return p, err }
	}
	other := func(f func(*payments.ProviderPayment)) payments.ProviderPayment { p := paid; f(&p); return p }
	badSig := errors.New("bad signature")
	down := errors.New("provider down")
	tests := []struct {
		name       string
		verifyErr  error
		body       []byte
		get        func(string) (payments.ProviderPayment, error)
		wantStatus int // 0: not a CallbackError
		wantCode   string
		wantErr    error
		wantGets   int
	}{
		{"bad signature", badSig, callbackBody(t, good), nil, http.StatusUnauthorized, "BAD_SIGNATURE", badSig, 0},
		{"not JSON", nil, []byte("{"), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"another event type", nil, callbackBody(t, with(func(c *CallbackBody) { c.Type = "payment.closed" })), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"no transaction", nil, callbackBody(t, with(func(c *CallbackBody) { c.TransactionID = "" })), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"no order", nil, callbackBody(t, with(func(c *CallbackBody) { c.MerchantOrderID = uuid.Nil })), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"provider has no such transaction", nil, callbackBody(t, good), at(payments.ProviderPayment{}, payments.ErrNoPayment),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"transaction of another order", nil, callbackBody(t, good), at(other(func(p *payments.ProviderPayment) { p.OrderID = uuid.New() }), nil),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"another amount at the provider", nil, callbackBody(t, good), at(other(func(p *payments.ProviderPayment) { p.AmountCents = 1 }), nil),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"another currency at the provider", nil, callbackBody(t, good), at(other(func(p *payments.ProviderPayment) { p.Currency = "JPY" }), nil),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"no currency", nil, callbackBody(t, with(func(c *CallbackBody) { c.Currency = "" })), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"not an ISO 4217 code", nil, callbackBody(t, with(func(c *CallbackBody) { c.Currency = "cny" })), nil, http.StatusBadRequest, "INVALID_CALLBACK", nil, 0},
		{"pending at the provider", nil, callbackBody(t, good), at(other(func(p *payments.ProviderPayment) { p.Status = payments.ProviderPending }), nil),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"closed at the provider", nil, callbackBody(t, good), at(other(func(p *payments.ProviderPayment) { p.Status = payments.ProviderClosed }), nil),
			http.StatusConflict, "PAYMENT_UNCONFIRMED", nil, 1},
		{"provider unreachable: a retry, not a refusal", nil, callbackBody(t, good), at(payments.ProviderPayment{}, down), 0, "", down, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &getProvider{get: tt.get}
			if p.get == nil {
				p.get = func(string) (payments.ProviderPayment, error) { t.Error("unexpected provider Get"); return paid, nil }
			}
			var gotID, gotTS, gotSig string
			s := callbackService(p, func(id, ts, sig string, _ []byte, _ time.Time) error {
				gotID, gotTS, gotSig = id, ts, sig
				return tt.verifyErr
			})
			h := http.Header{}
			h.Set("webhook-id", "msg_1")
			h.Set("webhook-timestamp", "1700000000")
			h.Set("webhook-signature", "v1,abc")
			err := s.HandleCallback(context.Background(), h, tt.body)
			if gotID != "msg_1" || gotTS != "1700000000" || gotSig != "v1,abc" {
				t.Errorf("verifier got %q %q %q, want the webhook headers", gotID, gotTS, gotSig)
			}
			var ce *CallbackError
			isCE := errors.As(err, &ce)
			switch {
			case err == nil:
				t.Fatal("callback accepted")
			case tt.wantStatus == 0 && isCE:
				t.Errorf("err = %v, want a plain error (retry), not a refusal", err)
			case tt.wantStatus != 0 && (!isCE || ce.Status != tt.wantStatus || ce.Code != tt.wantCode):
				t.Errorf("err = %v, want %d %s", err, tt.wantStatus, tt.wantCode)
			}
			if isCE {
				err = ce.Err // a refusal carries its cause (CallbackError has no Unwrap)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantErr)
			}
			if p.gets != tt.wantGets {
				t.Errorf("provider asked %d times, want %d", p.gets, tt.wantGets)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if got := (&StateError{"pay", "CANCELLED"}).Error(); got != "cannot pay an order that is CANCELLED" {
		t.Errorf("StateError = %q", got)
	}
	inner := errors.New("why")
	e := &CallbackError{http.StatusConflict, "PAYMENT_MISMATCH", inner}
	if e.Error() != "PAYMENT_MISMATCH: why" {
		t.Errorf("CallbackError = %q", e.Error())
	}
}

func TestNewServiceRequires(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	verify := func(string, string, string, []byte, time.Time) error { return nil }
	if s, err := NewService(nil, &getProvider{}, nil, verify, "http://cb", log, nil); err == nil || s != nil {
		t.Errorf("NewService without pool and sagas = %v, %v; want an error", s, err)
	}
}

func TestWebhookRefIsBounded(t *testing.T) {
	long := strings.Repeat("x\n", 8<<10) // 16 KB with line breaks
	for _, id := range []string{"", "msg_1", long} {
		if ref := WebhookRef(id); len(ref) != 16 || strings.ContainsAny(ref, "x\n") {
			t.Errorf("WebhookRef(%d bytes) = %q, want 16 hex characters", len(id), ref)
		}
	}
	if WebhookRef("msg_1") == WebhookRef("msg_2") {
		t.Error("two ids share a ref")
	}
}
