package api

// The admin surface: who may reach it (SECKILL_ADMIN_ALLOW), which operator
// called (one credential each), and the audit line of every call.

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/seckill/seckill/internal/checkout"
)

// requireAdmin refuses a client address off the allow-list (403), checks the
// admin credential (in constant time, 401) and logs every admin request: who
// (the operator and the credential's fingerprint), what, from where (the
// client address behind trusted proxies, and the peer), with the request id
// the gateway made, and how it ended.
func (h *handlers) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientAddr(r, h.d.Limits.TrustedProxies)
		base := []any{"method", r.Method, "path", r.URL.Path, "remote", client, "peer", r.RemoteAddr,
			"request", middleware.GetReqID(r.Context())}
		if ref := r.Header.Get(clientRequestIDHeader); ref != "" {
			base = append(base, "client_request_ref", checkout.WebhookRef(ref))
		}
		if h.d.AdminAllow != nil && !isTrusted(client, h.d.AdminAllow) {
			h.d.Log.Warn("api.admin_forbidden", base...)
			writeError(w, http.StatusForbidden, apiError{Code: "ADMIN_FORBIDDEN", Message: "admin is not served to this address"})
			return
		}
		who, ok := h.d.Auth.AdminOf(bearer(r))
		if !ok {
			h.d.Log.Warn("api.admin_denied", base...)
			w.Header().Set("WWW-Authenticate", `Bearer realm="seckill-admin"`)
			writeError(w, http.StatusUnauthorized, apiError{Code: "UNAUTHENTICATED", Message: "the admin credential is required"})
			return
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		what := &auditRecord{}
		// Logged even when the handler panics (the recoverer outside answers 500).
		defer func() {
			status := ww.Status()
			p := recover()
			if p != nil {
				status = http.StatusInternalServerError
			}
			h.d.Log.Info("admin.action", append(append([]any{"who", who}, base...), append([]any{"status", status,
				"duration_ms", time.Since(start).Milliseconds(), "panicked", p != nil}, what.attrs...)...)...)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), auditKey{}, what)))
	})
}

// clientRequestIDHeader carries, inside the gateway, the X-Request-Id a
// client sent: the gateway makes its own (serverRequestID) and logs the
// client's only as a bounded hash.
const clientRequestIDHeader = "X-Seckill-Client-Request-Id"

// serverRequestID keeps a client-chosen X-Request-Id out of the request id
// logs carry: middleware.RequestID, after it, always makes one. The client's
// value moves to a header of its own, logged as a bounded hash.
func serverRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(clientRequestIDHeader) // only this middleware sets it
		if v := r.Header.Get(middleware.RequestIDHeader); v != "" {
			r.Header.Del(middleware.RequestIDHeader)
			r.Header.Set(clientRequestIDHeader, v)
		}
		next.ServeHTTP(w, r)
	})
}

type auditKey struct{}

// auditRecord is what an admin handler adds to its admin.action line.
type auditRecord struct{ attrs []any }

// audit adds key/value pairs to the request's admin.action line.
func audit(r *http.Request, kv ...any) {
	if a, ok := r.Context().Value(auditKey{}).(*auditRecord); ok {
		a.attrs = append(a.attrs, kv...)
	}
}
