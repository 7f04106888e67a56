package paysim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
)

// HeaderMerchantKey authenticates the merchant on merchant endpoints.
const HeaderMerchantKey = "X-Merchant-Key"

// Error codes of the API ({"code": ..., "message": ...}).
const (
	CodeBadRequest       = "BAD_REQUEST"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeNotFound         = "NOT_FOUND"
	CodeAmountMismatch   = "AMOUNT_MISMATCH"
	CodePaymentClosed    = "PAYMENT_CLOSED"
	CodeAlreadyPaid      = "ALREADY_PAID"
	CodeAlreadyRefunded  = "ALREADY_REFUNDED"
	CodeNotPaid          = "NOT_PAID"
	CodeUnavailable      = "UNAVAILABLE"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
)

// Endpoint names accepted by POST /v1/control/fail-next.
var failableEndpoints = map[string]bool{
	"create": true, "get": true, "find": true, "pay": true, "close": true, "refund": true,
}

const (
	defaultMaxAttempts     = 12
	defaultBackoff         = 200 * time.Millisecond
	defaultMaxBackoff      = 10 * time.Second
	defaultCallbackTimeout = 5 * time.Second
	duplicateSpacing       = 5 * time.Millisecond
	maxBody                = 64 << 10
	maxDuplicates          = 100
)

// Options configure a Server. Secret and MerchantKey are required.
type Options struct {
	// Secret signs callbacks (HMAC-SHA256 key).
	Secret []byte
	// MerchantKey must be sent in X-Merchant-Key on merchant endpoints.
	MerchantKey string
	// Clock is the provider's time (paid_at, webhook-timestamp). Default time.Now.
	Clock func() time.Time
	// Logger defaults to discarding.
	Logger *slog.Logger
	// HTTPClient sends callbacks. Default: a client with its own transport,
	// whose idle connections Close releases.
	HTTPClient *http.Client
	// MaxCallbackAttempts bounds the attempts of one delivery. Default 12.
	MaxCallbackAttempts int
	// CallbackBackoff is the wait after the first failed attempt; it doubles
	// after each further failure, capped at MaxCallbackBackoff. Default 200ms.
	CallbackBackoff time.Duration
	// MaxCallbackBackoff caps the backoff. Default 10s.
	MaxCallbackBackoff time.Duration
	// CallbackTimeout bounds one delivery attempt. Default 5s.
	CallbackTimeout time.Duration
	// After is how the server waits (callback delay, duplicate spacing,
	// backoff). Default time.After; tests pass a fake to control time.
	After func(time.Duration) <-chan time.Time
}

// Server is the simulated provider. All state is in memory, guarded by one
// mutex; it is safe for concurrent use.
type Server struct {
	opts      Options
	log       *slog.Logger
	client    *http.Client
	ownClient bool
	handler   http.Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu       sync.Mutex
	closed   bool
	payments map[string]*Payment  // by transaction id
	byOrder  map[uuid.UUID]string // merchant order id → transaction id
	failNext map[string]failRule  // endpoint → injected failures
	cb       CallbackStats
}

type failRule struct {
	times int
	after bool
}

// New validates opts, fills defaults and returns a Server. Call Close when done.
func New(opts Options) (*Server, error) {
	if len(opts.Secret) == 0 {
		return nil, errors.New("paysim: Options.Secret is required")
	}
	if opts.MerchantKey == "" {
		return nil, errors.New("paysim: Options.MerchantKey is required")
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxCallbackAttempts <= 0 {
		opts.MaxCallbackAttempts = defaultMaxAttempts
	}
	if opts.CallbackBackoff <= 0 {
		opts.CallbackBackoff = defaultBackoff
	}
	if opts.MaxCallbackBackoff <= 0 {
		opts.MaxCallbackBackoff = defaultMaxBackoff
	}
	if opts.CallbackTimeout <= 0 {
		opts.CallbackTimeout = defaultCallbackTimeout
	}
	if opts.After == nil {
		opts.After = time.After
	}
	opts.Secret = append([]byte(nil), opts.Secret...)
	s := &Server{
		opts:     opts,
		log:      opts.Logger,
		client:   opts.HTTPClient,
		payments: make(map[string]*Payment),
		byOrder:  make(map[uuid.UUID]string),
		failNext: make(map[string]failRule),
	}
	if s.client == nil {
		s.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		s.ownClient = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()
	return s, nil
}

// Close stops every callback delivery (pending waits and attempts in flight)
// and waits for their goroutines to return. Payments paid afterwards send no
// callbacks. Close is idempotent; the handler keeps answering.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		if s.ownClient {
			s.client.CloseIdleConnections()
		}
	})
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Stats returns the current counters (as GET /v1/stats).
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Payments: map[Status]int{StatusPending: 0, StatusPaid: 0, StatusClosed: 0, StatusRefunded: 0}, Callbacks: s.cb}
	for _, p := range s.payments {
		st.Payments[p.Status]++
	}
	return st
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such endpoint", nil)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed", nil)
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Route("/v1", func(r chi.Router) {
		// The user pays at the provider: no merchant key.
		r.Post("/payments/{txn}/pay", s.handlePay)
		r.Get("/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
		r.Group(func(r chi.Router) {
			r.Use(s.requireMerchant)
			r.Post("/payments", s.handleCreate)
			r.Get("/payments", s.handleFind)
			r.Get("/payments/{txn}", s.handleGet)
			r.Post("/payments/{txn}/close", s.handleClose)
			r.Post("/payments/{txn}/refund", s.handleRefund)
			r.Post("/control/fail-next", s.handleFailNext)
		})
	})
	return r
}

func (s *Server) requireMerchant(next http.Handler) http.Handler {
	key := []byte(s.opts.MerchantKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderMerchantKey)), key) != 1 {
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong "+HeaderMerchantKey, nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// injected takes one injected failure of endpoint, if any. When it returns
// fail && !after the handler answers 503 without doing anything; with after
// it does the work and then answers 503 (the response is "lost").
func (s *Server) injected(endpoint string) (fail, after bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rule, ok := s.failNext[endpoint]
	if !ok {
		return false, false
	}
	rule.times--
	if rule.times <= 0 {
		delete(s.failNext, endpoint)
	} else {
		s.failNext[endpoint] = rule
	}
	return true, rule.after
}

func writeInjected(w http.ResponseWriter, endpoint string) {
	w.Header().Set("Retry-After", "0")
	writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "injected failure of "+endpoint, nil)
}

// endpointFunc does the work of an endpoint and returns status and body.
type endpointFunc func() (int, any)

// serve runs fn under the injected-failure rule of endpoint.
func (s *Server) serve(w http.ResponseWriter, endpoint string, fn endpointFunc) {
	fail, after := s.injected(endpoint)
	if fail && !after {
		writeInjected(w, endpoint)
		return
	}
	status, body := fn()
	if fail {
		writeInjected(w, endpoint)
		return
	}
	writeJSON(w, status, body)
}

func (s *Server) now() time.Time { return s.opts.Clock().UTC() }

// errorBody is every non-2xx answer.
type errorBody struct {
	Code    string   `json:"code"`
	Message string   `json:"message,omitempty"`
	Payment *Payment `json:"payment,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, p *Payment) {
	writeJSON(w, status, errorBody{Code: code, Message: msg, Payment: p})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body of at most maxBody bytes. optional allows an empty
// body; strict rejects unknown fields (for test knobs, where a typo would
// silently do nothing).
func decode(r *http.Request, v any, optional, strict bool) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if optional && errors.Is(err, io.EOF) {
			return nil
		}
		return fmt.Errorf("bad JSON body: %v", err)
	}
	return nil
}
