package api

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/httprate"
)

// Limits bound how fast one client may hit the reservation and payment
// endpoints (OWASP API4, API6). A zero rate is no limit. Counters are kept in
// the gateway's memory (sliding window): with several gateways each applies
// its own, so a client behind a load balancer gets up to N times the rate.
type Limits struct {
	// PerUser: requests per Window by one authenticated user.
	PerUser int
	// PerIP: requests per Window from one client address (IPv6 by /64), before
	// authentication.
	PerIP  int
	Window time.Duration
}

type limiters struct {
	ip, user func(http.Handler) http.Handler
}

func newLimiters(l Limits, log *slog.Logger) limiters {
	pass := func(next http.Handler) http.Handler { return next }
	out := limiters{ip: pass, user: pass}
	if l.Window <= 0 {
		l.Window = time.Second
	}
	refuse := func(by string) httprate.Option {
		return httprate.WithLimitHandler(func(w http.ResponseWriter, r *http.Request) {
			log.Info("api.rate_limited", "by", by, "path", r.URL.Path, "remote", r.RemoteAddr)
			// httprate set Retry-After (seconds until the window frees a slot).
			if w.Header().Get("Retry-After") == "" {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(l.Window.Seconds()))))
			}
			writeError(w, http.StatusTooManyRequests, apiError{Code: "RATE_LIMITED",
				Message: fmt.Sprintf("too many requests from this %s; retry after the Retry-After seconds (with the same Idempotency-Key)", by)})
		})
	}
	if l.PerIP > 0 {
		out.ip = httprate.LimitBy(l.PerIP, l.Window, func(r *http.Request) (string, error) {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				host = r.RemoteAddr
			}
			return "ip:" + httprate.CanonicalizeIP(host), nil
		}, refuse("client address"))
	}
	if l.PerUser > 0 {
		out.user = httprate.LimitBy(l.PerUser, l.Window, func(r *http.Request) (string, error) {
			return "user:" + strconv.FormatInt(userOf(r), 10), nil
		}, refuse("user"))
	}
	return out
}
