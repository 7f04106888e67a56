package api

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/httprate"
)

// Limits bound how fast one client may hit the reservation and payment
// endpoints (OWASP API4, API6). A zero rate is no limit. Counters are kept in
// the gateway's memory (sliding window): with several gateways each applies
// its own, so a client behind a load balancer gets up to N times the rate.
type Limits struct {
	// PerUser: requests per Window by one authenticated user to the business
	// flows (reserve, start payment, cancel).
	PerUser int
	// PerIP: requests per Window from one client address (IPv6 by /64), before
	// authentication; counted apart for the flows and for the reads.
	PerIP int
	// ReadPerUser: requests per Window by one user to the reads (reservation
	// and order status, which clients poll).
	ReadPerUser int
	// Callback: payment callbacks per Window from one client address (the
	// provider's senders), counted before the signature is checked.
	Callback int
	// Admin: admin requests per Window from one client address, counted
	// before the admin token is checked (a guessing bound).
	Admin  int
	Window time.Duration
	// TrustedProxies are the addresses of the proxies in front of the
	// gateway: a request from one of them is counted by the client address
	// it names in X-Forwarded-For (the right-most one that is not itself a
	// trusted proxy). From anyone else, X-Forwarded-For is ignored.
	TrustedProxies []netip.Prefix
}

// onlyRetryAfter keeps httprate's Retry-After on a refusal (the contract's
// header) and drops the X-RateLimit-* headers it would set on every answer:
// no client is told of them (api/openapi.yaml), and each limiter's three
// headers were a measurable share of the hot path's allocations
// (BenchmarkReserveRateLimits, docs/benchmarks.md).
var onlyRetryAfter = httprate.WithResponseHeaders(httprate.ResponseHeaders{RetryAfter: "Retry-After"})

// limiters are the middlewares of the two groups of endpoints, each with
// counters of its own.
type limiters struct {
	ip, user         func(http.Handler) http.Handler // business flows
	readIP, readUser func(http.Handler) http.Handler // status reads
	callback, admin  func(http.Handler) http.Handler // provider callbacks, admin
}

func newLimiters(l Limits, log *slog.Logger) limiters {
	pass := func(next http.Handler) http.Handler { return next }
	var out limiters
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
	byIP := func(n int, what string) func(http.Handler) http.Handler {
		if n <= 0 {
			return pass
		}
		return httprate.LimitBy(n, l.Window, func(r *http.Request) (string, error) {
			return "ip:" + httprate.CanonicalizeIP(clientAddr(r, l.TrustedProxies)), nil
		}, refuse(what), onlyRetryAfter)
	}
	byUser := func(n int) func(http.Handler) http.Handler {
		if n <= 0 {
			return pass
		}
		return httprate.LimitBy(n, l.Window, func(r *http.Request) (string, error) {
			return "user:" + strconv.FormatInt(userOf(r), 10), nil
		}, refuse("user"), onlyRetryAfter)
	}
	out.ip, out.user = byIP(l.PerIP, "client address"), byUser(l.PerUser)
	out.readIP, out.readUser = byIP(l.PerIP, "client address"), byUser(l.ReadPerUser)
	out.callback, out.admin = byIP(l.Callback, "client address"), byIP(l.Admin, "client address")
	return out
}

// clientAddr is the address a request is counted by: the peer's, or, when
// the peer is a trusted proxy, the right-most X-Forwarded-For entry that is
// not a trusted proxy (entries left of it are the client's to write).
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !isTrusted(host, trusted) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if _, err := netip.ParseAddr(hop); err != nil {
			return host // garbage from the client's side: count the proxy
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
	}
	return host
}

func isTrusted(addr string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
