package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Business errors; an *APIError matches the one of its code with errors.Is.
var (
	ErrNotFound        = errors.New("paysim: not found")
	ErrAmountMismatch  = errors.New("paysim: amount mismatch")
	ErrPaymentClosed   = errors.New("paysim: payment closed")
	ErrAlreadyPaid     = errors.New("paysim: already paid")
	ErrAlreadyRefunded = errors.New("paysim: already refunded")
	ErrNotPaid         = errors.New("paysim: not paid")
	ErrUnauthorized    = errors.New("paysim: unauthorized")
	ErrBadRequest      = errors.New("paysim: bad request")
	ErrUnavailable     = errors.New("paysim: unavailable")
)

var codeErrors = map[string]error{
	CodeNotFound:        ErrNotFound,
	CodeAmountMismatch:  ErrAmountMismatch,
	CodePaymentClosed:   ErrPaymentClosed,
	CodeAlreadyPaid:     ErrAlreadyPaid,
	CodeAlreadyRefunded: ErrAlreadyRefunded,
	CodeNotPaid:         ErrNotPaid,
	CodeUnauthorized:    ErrUnauthorized,
	CodeBadRequest:      ErrBadRequest,
	CodeUnavailable:     ErrUnavailable,
}

// APIError is a non-2xx answer of the provider.
type APIError struct {
	Op      string // client method, e.g. "close"
	Status  int    // HTTP status
	Code    string // API error code, e.g. "ALREADY_PAID"; empty if the body had none
	Message string
	// Payment is the provider's record when the answer carried one (409s).
	Payment *Payment
}

func (e *APIError) Error() string {
	return fmt.Sprintf("paysim %s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

// Unwrap returns the sentinel of e.Code (ErrNotFound, ...), if any.
func (e *APIError) Unwrap() error { return codeErrors[e.Code] }

// AlreadyPaidError is Close's answer when the provider says the payment was
// paid (409 ALREADY_PAID): the merchant lost the race and must honour Payment.
type AlreadyPaidError struct {
	Payment Payment
	api     *APIError
}

func (e *AlreadyPaidError) Error() string {
	return fmt.Sprintf("paysim close: payment %s already %s", e.Payment.TransactionID, e.Payment.Status)
}

// Unwrap returns the underlying *APIError (which matches ErrAlreadyPaid).
func (e *AlreadyPaidError) Unwrap() error { return e.api }

// NetworkError is a request that got no HTTP answer: its outcome is unknown.
type NetworkError struct {
	Op  string
	Err error
}

func (e *NetworkError) Error() string { return fmt.Sprintf("paysim %s: %v", e.Op, e.Err) }
func (e *NetworkError) Unwrap() error { return e.Err }

// IsRetryable reports whether err may succeed if the same call is repeated:
// transport failures and timeouts (except the caller's own cancellation),
// 5xx and 429. Business answers (4xx) are not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Status >= 500 || api.Status == http.StatusTooManyRequests
	}
	var ne *NetworkError
	if errors.As(err, &ne) {
		return !errors.Is(err, context.Canceled)
	}
	return false
}

// Client is the merchant side of the provider API.
type Client struct {
	BaseURL     string // e.g. "http://127.0.0.1:18090"
	MerchantKey string
	// HTTP defaults to a client with a 10s timeout.
	HTTP *http.Client
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// Create opens (or, for the same order, returns) the payment of orderID.
// A second call with another amount or currency fails with ErrAmountMismatch.
func (c *Client) Create(ctx context.Context, orderID uuid.UUID, amountCents int64, currency, callbackURL string) (Payment, error) {
	var p Payment
	err := c.do(ctx, "create", http.MethodPost, "/v1/payments", createRequest{
		MerchantOrderID: orderID.String(), AmountCents: amountCents, Currency: currency, CallbackURL: callbackURL,
	}, &p)
	return p, err
}

// Get returns the payment txn (ErrNotFound if unknown).
func (c *Client) Get(ctx context.Context, txn string) (Payment, error) {
	var p Payment
	err := c.do(ctx, "get", http.MethodGet, "/v1/payments/"+url.PathEscape(txn), nil, &p)
	return p, err
}

// FindByOrder returns the payment of a merchant order (ErrNotFound if none).
func (c *Client) FindByOrder(ctx context.Context, orderID uuid.UUID) (Payment, error) {
	var p Payment
	err := c.do(ctx, "find", http.MethodGet, "/v1/payments?merchant_order_id="+url.QueryEscape(orderID.String()), nil, &p)
	return p, err
}

// Pay simulates the user paying txn (ErrPaymentClosed if it was closed).
func (c *Client) Pay(ctx context.Context, txn string, opts PayOptions) (Payment, error) {
	var p Payment
	err := c.do(ctx, "pay", http.MethodPost, "/v1/payments/"+url.PathEscape(txn)+"/pay", opts, &p)
	return p, err
}

// Close closes an unpaid payment (idempotent). If the provider says it was
// paid, the error is an *AlreadyPaidError carrying the payment.
func (c *Client) Close(ctx context.Context, txn string) (Payment, error) {
	var p Payment
	err := c.do(ctx, "close", http.MethodPost, "/v1/payments/"+url.PathEscape(txn)+"/close", struct{}{}, &p)
	var api *APIError
	if errors.As(err, &api) && api.Code == CodeAlreadyPaid && api.Payment != nil {
		return *api.Payment, &AlreadyPaidError{Payment: *api.Payment, api: api}
	}
	return p, err
}

// Refund refunds a paid payment in full; the same refundID again is
// idempotent, another one fails with ErrAlreadyRefunded, an unpaid payment
// with ErrNotPaid. amountCents 0 means the full amount.
func (c *Client) Refund(ctx context.Context, txn, refundID string, amountCents int64) (Payment, error) {
	var p Payment
	err := c.do(ctx, "refund", http.MethodPost, "/v1/payments/"+url.PathEscape(txn)+"/refund",
		refundRequest{RefundID: refundID, AmountCents: amountCents}, &p)
	return p, err
}

// Stats returns the provider's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.do(ctx, "stats", http.MethodGet, "/v1/stats", nil, &st)
	return st, err
}

// FailNext makes the next times calls of endpoint (create, get, find, pay,
// close, refund) answer 503; with after the work is done first.
func (c *Client) FailNext(ctx context.Context, endpoint string, times int, after bool) error {
	return c.do(ctx, "fail-next", http.MethodPost, "/v1/control/fail-next",
		FailNextRequest{Endpoint: endpoint, Times: times, After: after}, nil)
}

func (c *Client) do(ctx context.Context, op, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("paysim %s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("paysim %s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderMerchantKey, c.MerchantKey)
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &NetworkError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &NetworkError{Op: op, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		api := &APIError{Op: op, Status: resp.StatusCode}
		var eb errorBody
		if json.Unmarshal(raw, &eb) == nil {
			api.Code, api.Message, api.Payment = eb.Code, eb.Message, eb.Payment
		} else {
			api.Message = strings.TrimSpace(string(raw))
		}
		return api
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("paysim %s: decoding HTTP %d answer: %w", op, resp.StatusCode, err)
	}
	return nil
}
