// Package api is the HTTP edge of seckill (the gateway): JSON under /v1,
// described by openapi.yaml in this folder. It authenticates every caller,
// authorizes every read to its owner, and maps business outcomes to stable
// error codes. No panic reaches a client.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
)

// Reserver is the admission the API calls (internal/reservation.Reserver).
type Reserver interface {
	Reserve(ctx context.Context, userID, activityID, skuID int64, requestID uuid.UUID) (reservation.Result, error)
}

// StatusReader reads a caller's reservation.
type StatusReader interface {
	Get(ctx context.Context, userID, activityID, skuID int64, rid uuid.UUID) (reservation.View, error)
}

// Deps are the API's collaborators.
type Deps struct {
	Auth     *auth.Authenticator
	Reserver Reserver
	Status   StatusReader
	Pool     *pgxpool.Pool // admin sale set-up
	Redis    redis.Cmdable // admin sale set-up
	Checkout Checkout      // orders, payments, callbacks; nil answers 503 there
	Explain  Explainer     // GET /v1/admin/explain/{id}; nil answers 503 there
	Log      *slog.Logger
	// Limits are the abuse limits of the reservation and payment endpoints
	// (the zero value limits nothing).
	Limits Limits
	// AdminAllow are the client addresses the admin endpoints answer (403
	// ADMIN_FORBIDDEN to anyone else); nil lets every address through.
	AdminAllow []netip.Prefix
	// HandlerTimeout is every handler's deadline (default 10 s).
	HandlerTimeout time.Duration
	// ReserveBudget bounds a reserve request, ReadBudget a reservation or
	// order read (default 1 s each): past it the answer is 503 UNAVAILABLE
	// with Retry-After, whatever a dependency does.
	ReserveBudget, ReadBudget time.Duration
}

// DefaultBudget is the default reserve and read budget.
const DefaultBudget = time.Second

// Body limits: a reserve request carries at most a request_id.
const (
	maxReserveBody = 1 << 10
	maxAdminBody   = 1 << 20
)

// NewRouter builds the HTTP handler.
func NewRouter(d Deps) http.Handler {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.HandlerTimeout <= 0 {
		d.HandlerTimeout = 10 * time.Second
	}
	if d.ReserveBudget <= 0 {
		d.ReserveBudget = DefaultBudget
	}
	if d.ReadBudget <= 0 {
		d.ReadBudget = DefaultBudget
	}
	r := chi.NewRouter()
	r.Use(serverRequestID, middleware.RequestID, recoverer(d.Log))
	// Every route runs under one deadline, set before its limits and its
	// authentication: its budget where it has one, else the handler timeout
	// (one timer and one request copy per request; TestEveryRouteHasOneDeadline).
	timeout := deadline(d.HandlerTimeout).bound
	r.With(timeout).Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	h := &handlers{d: d}
	lim := newLimiters(d.Limits, d.Log)
	r.Route("/v1", func(r chi.Router) {
		r.With(timeout).Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(OpenAPI)
		})
		// Limited per client address before authentication, per user after
		// it: the reads clients poll, and (tighter) the business flows bots go
		// for (OWASP API4, API6). A limiter's counters are shared by every
		// route it guards.
		r.Group(func(r chi.Router) {
			r.Use(deadline(d.ReadBudget).bound, lim.readIP, h.requireUser, lim.readUser)
			r.Get("/activities/{activity_id}/skus/{sku_id}/reservations/{reservation_id}", h.getReservation)
			r.Get("/orders/{order_id}", h.getOrder)
		})
		r.With(deadline(d.ReserveBudget).bound, lim.ip, h.requireUser, lim.user).
			Post("/activities/{activity_id}/skus/{sku_id}/reservations", h.reserve)
		r.Group(func(r chi.Router) {
			r.Use(timeout, lim.ip, h.requireUser, lim.user)
			r.Post("/orders/{order_id}/payments", h.startPayment)
			r.Post("/orders/{order_id}/cancel", h.cancelOrder)
		})
		// Authenticated by the provider's signature, not a bearer token.
		r.With(timeout, lim.callback).Post("/payments/callback", h.paymentCallback)
		r.Group(func(r chi.Router) {
			r.Use(timeout, lim.admin, h.requireAdmin)
			r.Post("/admin/activities", h.setupSale)
			r.Get("/admin/explain/{id}", h.explainPurchase)
		})
	})
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Code: "NOT_FOUND", Message: "no such endpoint"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		allow := allowedMethods(r, req)
		if len(allow) == 0 { // no method at all serves this path
			writeError(w, http.StatusNotFound, apiError{Code: "NOT_FOUND", Message: "no such endpoint"})
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, apiError{Code: "METHOD_NOT_ALLOWED", Message: "method not allowed on this endpoint"})
	})
	return r
}

// allowedMethods lists the methods routed for the request's path, for the
// Allow header every 405 answer must carry (RFC 9110 §15.5.6).
func allowedMethods(mx *chi.Mux, r *http.Request) []string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if mx.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
		}
	}
	return allow
}

type handlers struct{ d Deps }

type ctxKey struct{}

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers e. A 503 always says when to come back (Retry-After):
// the outcome is unknown or a dependency is down, and a retry with the same
// key is safe.
func writeError(w http.ResponseWriter, status int, e apiError) {
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfterUnavailable)
	}
	writeJSON(w, status, e)
}

// retryAfterUnavailable is the Retry-After of a 503, in seconds.
const retryAfterUnavailable = "1"

func invalid(w http.ResponseWriter, field, msg string) {
	writeError(w, http.StatusBadRequest, apiError{Code: "INVALID_ARGUMENT", Field: field, Message: msg})
}

func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					log.Error("api.panic", "panic", fmt.Sprint(v), "path", r.URL.Path, "request", middleware.GetReqID(r.Context()), "stack", string(debug.Stack()))
					writeError(w, http.StatusInternalServerError, apiError{Code: "INTERNAL", Message: "internal error"})
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func (h *handlers) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, err := h.d.Auth.User(bearer(r))
		if err != nil {
			h.d.Log.Info("api.unauthenticated", "path", r.URL.Path, "error", err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="seckill"`)
			writeError(w, http.StatusUnauthorized, apiError{Code: "UNAUTHENTICATED", Message: "a valid bearer token is required"})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, uid)))
	})
}

func userOf(r *http.Request) int64 { return r.Context().Value(ctxKey{}).(int64) }

// pathID parses a positive integer path parameter, written canonically (no
// sign, no leading zeros): one id, one spelling.
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v, ok := ParseID(chi.URLParam(r, name))
	if !ok {
		invalid(w, name, "must be a positive integer in canonical decimal (no sign, no leading zeros)")
		return 0, false
	}
	return v, true
}

// ParseID parses a positive int64 written in canonical decimal.
func ParseID(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

type reserveBody struct {
	RequestID string `json:"request_id"`
}

// reserve admits one request. The request_id comes from the Idempotency-Key
// header or the body's request_id (if both, they must agree).
func (h *handlers) reserve(w http.ResponseWriter, r *http.Request) {
	activityID, ok := pathID(w, r, "activity_id")
	if !ok {
		return
	}
	skuID, ok := pathID(w, r, "sku_id")
	if !ok {
		return
	}
	var body reserveBody
	if err := decodeOptional(w, r, maxReserveBody, &body); err != nil {
		bodyError(w, err)
		return
	}
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	field := "Idempotency-Key" // where the key came from, for the error answer
	switch {
	case key == "" && body.RequestID == "":
		invalid(w, "Idempotency-Key", "required: a UUID naming this request; reuse it when retrying")
		return
	case key != "" && body.RequestID != "" && !strings.EqualFold(key, body.RequestID):
		invalid(w, "request_id", "differs from the Idempotency-Key header")
		return
	case key == "":
		key, field = body.RequestID, "request_id"
	}
	requestID, err := uuid.Parse(key)
	if err != nil || len(key) != 36 || requestID == uuid.Nil {
		invalid(w, field, "must be a UUID in its 36-character form, not the nil UUID")
		return
	}
	res, err := h.d.Reserver.Reserve(r.Context(), userOf(r), activityID, skuID, requestID)
	if err != nil {
		h.d.Log.Error("api.reserve_failed", "activity_id", activityID, "sku_id", skuID, "request_id", requestID, "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE",
			Message: "the reservation could not be confirmed; retry with the same Idempotency-Key"})
		return
	}
	switch res.Code {
	case reservation.Queued:
		writeBody(w, http.StatusAccepted, queuedBody(activityID, skuID, res.ReservationID))
	case reservation.SoldOut:
		writeBody(w, http.StatusConflict, soldOutBody)
	case reservation.AlreadyReserved:
		writeJSON(w, http.StatusConflict, map[string]any{"code": string(res.Code),
			"message": "you already hold a reservation for this item", "reservation_id": res.ReservationID})
	case reservation.SaleLimitReached:
		writeJSON(w, http.StatusConflict, map[string]any{"code": string(res.Code), "max_per_user": res.Limit.MaxPerUser,
			"message":              "you hold as many reservations as this sale allows; cancelling one frees a place",
			"held_reservation_ids": res.Limit.Held})
	case reservation.NotStarted:
		writeError(w, http.StatusForbidden, apiError{Code: string(res.Code), Message: "the sale has not started"})
	case reservation.Ended:
		writeError(w, http.StatusForbidden, apiError{Code: string(res.Code), Message: "the sale has ended"})
	case reservation.UnknownSale:
		writeError(w, http.StatusNotFound, apiError{Code: string(res.Code), Message: "no such activity or sku on sale"})
	default:
		h.d.Log.Error("api.unknown_reserve_code", "code", res.Code)
		writeError(w, http.StatusInternalServerError, apiError{Code: "INTERNAL", Message: "internal error"})
	}
}

func (h *handlers) getReservation(w http.ResponseWriter, r *http.Request) {
	activityID, ok := pathID(w, r, "activity_id")
	if !ok {
		return
	}
	skuID, ok := pathID(w, r, "sku_id")
	if !ok {
		return
	}
	rid, err := uuid.Parse(chi.URLParam(r, "reservation_id"))
	if err != nil {
		invalid(w, "reservation_id", "must be a UUID")
		return
	}
	v, err := h.d.Status.Get(r.Context(), userOf(r), activityID, skuID, rid)
	switch {
	case errors.Is(err, reservation.ErrNotFound):
		writeError(w, http.StatusNotFound, apiError{Code: "NOT_FOUND", Message: "no such reservation"})
	case err != nil:
		h.d.Log.Error("api.status_failed", "reservation_id", rid, "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "status temporarily unavailable; retry"})
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func (h *handlers) setupSale(w http.ResponseWriter, r *http.Request) {
	var a sale.Activity
	if err := decodeRequired(w, r, maxAdminBody, &a); err != nil {
		bodyError(w, err)
		return
	}
	skus := make([]int64, len(a.SKUs))
	for i, k := range a.SKUs {
		skus[i] = k.SKUID
	}
	audit(r, "activity_id", a.ActivityID, "sku_ids", skus, "starts_at", a.StartsAt, "ends_at", a.EndsAt)
	res, err := sale.Setup(r.Context(), h.d.Pool, h.d.Redis, a)
	if err == nil {
		created := 0
		for _, k := range res {
			if k.Created {
				created++
			}
		}
		audit(r, "skus_created", created)
	}
	var fe *sale.FieldError
	var bf *sale.BucketsFixedError
	var mf *sale.MaxPerUserFixedError
	var cf *sale.CurrencyFixedError
	switch {
	case errors.As(err, &fe):
		invalid(w, fe.Field, fe.Reason)
	case errors.As(err, &bf):
		writeError(w, http.StatusConflict, apiError{Code: "BUCKETS_FIXED", Field: bf.Field, Message: bf.Error()})
	case errors.As(err, &mf):
		writeError(w, http.StatusConflict, apiError{Code: "MAX_PER_USER_FIXED", Field: "max_per_user", Message: mf.Error()})
	case errors.As(err, &cf):
		writeError(w, http.StatusConflict, apiError{Code: "CURRENCY_FIXED", Field: "currency", Message: cf.Error()})
	case errors.Is(err, sale.ErrRedisNeedsRebuild):
		writeError(w, http.StatusConflict, apiError{Code: "REDIS_NEEDS_REBUILD", Message: err.Error()})
	case err != nil:
		h.d.Log.Error("api.sale_setup_failed", "activity_id", a.ActivityID, "error", err)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "UNAVAILABLE", Message: "sale set-up failed; it is safe to retry"})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"activity_id": a.ActivityID, "skus": res})
	}
}

// deadline is how long a route's handling may take: its budget, or the
// handler timeout. A handler stuck on a backend answers 503 by then instead
// of holding the connection. bound is its middleware; a type of its own lets
// TestEveryRouteHasOneDeadline find it among a route's middlewares.
type deadline time.Duration

// bound runs the rest of the route with the request's context bounded by d.
func (d deadline) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(d))
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Server is the API's HTTP server with sane timeouts.
func Server(addr string, h http.Handler) *http.Server {
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 16 << 10}
}
