package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/reservation"
)

// A body the endpoint will not take is refused with its own status, before
// anything is called: too large → 413, not declared JSON → 415.
func TestBodiesTooLargeOrNotJSON(t *testing.T) {
	u := newUnit(t)
	key := uuid.NewString()
	user := hdr("Authorization", "Bearer "+u.tok, "Idempotency-Key", key)
	admin := hdr("Authorization", "Bearer "+testAdminToken)
	small := `{"request_id":"` + key + `"}`
	cases := []struct {
		name, path string
		header     http.Header
		ct, body   string
		status     int
		code       string
	}{
		{"reserve, > 1 KiB", reservePath, user, "application/json", small + strings.Repeat(" ", 1100), 413, "PAYLOAD_TOO_LARGE"},
		{"reserve, garbage > 1 KiB", reservePath, user, "application/json", strings.Repeat("x", 5000), 413, "PAYLOAD_TOO_LARGE"},
		{"reserve, text/plain", reservePath, user, "text/plain", small, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"reserve, form", reservePath, user, "application/x-www-form-urlencoded", "request_id=" + key, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"reserve, no content type", reservePath, user, "none", small, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"admin, > 1 MiB", "/v1/admin/activities", admin, "application/json", `{"name":"` + strings.Repeat("n", 1<<20) + `"}`, 413, "PAYLOAD_TOO_LARGE"},
		{"admin, text/plain", "/v1/admin/activities", admin, "text/plain", `{}`, 415, "UNSUPPORTED_MEDIA_TYPE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.header.Clone()
			if c.ct != "none" {
				h.Set("Content-Type", c.ct)
			} else {
				h.Set("Content-Type", "")
			}
			rec, m := u.do(http.MethodPost, c.path, h, c.body)
			expectError(t, rec, m, c.status, c.code, "body")
		})
	}
	// JSON with a charset parameter is JSON.
	h := user.Clone()
	h.Set("Content-Type", "application/json; charset=utf-8")
	if rec, _ := u.do(http.MethodPost, reservePath, h, small); rec.Code != http.StatusAccepted {
		t.Fatalf("application/json; charset=utf-8 = %d %s", rec.Code, rec.Body.String())
	}
	if n := len(u.res.Calls()); n != 1 {
		t.Fatalf("reserver called %d times, want once (for the JSON one)", n)
	}
}

// The reservation endpoint is limited per user and per client address: the
// request past the limit gets 429 with Retry-After and a JSON error, and is
// not passed on; another user (another address) is not affected.
func TestRateLimits(t *testing.T) {
	a := newAuth(t)
	res := &fakeReserver{res: reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}}
	var logs bytes.Buffer
	h := api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{}, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Limits: api.Limits{PerUser: 3, PerIP: 5, Window: time.Minute}})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	d := loadDoc(t)
	send := func(user int64, ip string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, reservePath, nil)
		req.Header.Set("Authorization", "Bearer "+mint(t, a, user, time.Hour))
		req.Header.Set("Idempotency-Key", uuid.NewString())
		req.RemoteAddr = ip + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		d.conform(t, h, http.MethodPost, reservePath, rec)
		return rec.Code, rec.Header(), rec.Body.String()
	}
	for i := range 3 {
		if code, _, body := send(1, "10.0.0.1"); code != http.StatusAccepted {
			t.Fatalf("user 1 request %d = %d %s", i+1, code, body)
		}
	}
	code, hdrs, body := send(1, "10.0.0.1")
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"RATE_LIMITED"`) || hdrs.Get("Content-Type") != "application/json" {
		t.Fatalf("user 1 request 4 = %d %s", code, body)
	}
	if ra, err := strconv.Atoi(hdrs.Get("Retry-After")); err != nil || ra <= 0 || ra > 60 {
		t.Fatalf("Retry-After = %q", hdrs.Get("Retry-After"))
	}
	if n := len(res.Calls()); n != 3 {
		t.Fatalf("the refused request reached the reserver (%d calls)", n)
	}
	// Another user from the same address has the address's remaining budget.
	if code, _, _ := send(2, "10.0.0.1"); code != http.StatusAccepted {
		t.Fatalf("user 2 = %d", code)
	}
	// The address is spent (5 requests: 3 + 1 refused + 1), whoever the user.
	if code, _, body := send(3, "10.0.0.1"); code != http.StatusTooManyRequests || !strings.Contains(body, "client address") {
		t.Fatalf("user 3 from the spent address = %d %s", code, body)
	}
	if code, _, _ := send(3, "10.0.0.2"); code != http.StatusAccepted {
		t.Fatalf("user 3 from another address = %d", code)
	}
	// The same IPv6 /64 is one address.
	send(4, "[2001:db8::1]")
	for range 4 {
		send(5, "[2001:db8::2]")
	}
	if code, _, _ := send(6, "[2001:db8::3]"); code != http.StatusTooManyRequests {
		t.Fatalf("IPv6 /64 not limited as one address: %d", code)
	}
}

// Status reads have a per-user limit of their own (clients poll them), and
// cancel counts with the business flows: spending one budget leaves the
// other untouched.
func TestReadsAndCancelAreLimited(t *testing.T) {
	a := newAuth(t)
	res := &fakeReserver{res: reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}}
	h := api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{err: reservation.ErrNotFound},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: api.Limits{PerUser: 2, ReadPerUser: 3, Window: time.Minute}})
	tok := "Bearer " + mint(t, a, 7, time.Hour)
	read := func() int {
		return serve(h, http.MethodGet, reservePath+"/"+uuid.NewString(), hdr("Authorization", tok), "").Code
	}
	for i := range 3 {
		if code := read(); code != http.StatusNotFound {
			t.Fatalf("read %d = %d, want 404 (no such reservation)", i+1, code)
		}
	}
	if code := read(); code != http.StatusTooManyRequests {
		t.Fatalf("read 4 = %d, want 429", code)
	}
	for i := range 2 {
		if code := serve(h, http.MethodPost, reservePath, hdr("Authorization", tok, "Idempotency-Key", uuid.NewString()), "").Code; code != http.StatusAccepted {
			t.Fatalf("reserve %d after the reads = %d, want 202 (its own budget)", i+1, code)
		}
	}
	if code := serve(h, http.MethodPost, "/v1/orders/"+uuid.NewString()+"/cancel", hdr("Authorization", tok), "").Code; code != http.StatusTooManyRequests {
		t.Fatalf("cancel after the flows' budget is spent = %d, want 429", code)
	}
}

// Payment callbacks and admin requests have per-address limits of their own,
// counted before the signature or the admin token is checked: the request
// past the limit is refused with 429 whatever it carries, and another
// address is not affected.
func TestCallbackAndAdminAreLimited(t *testing.T) {
	a := newAuth(t)
	h := api.NewRouter(api.Deps{Auth: a, Reserver: &fakeReserver{}, Status: &fakeStatus{},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: api.Limits{Callback: 2, Admin: 3, Window: time.Minute}})
	d := loadDoc(t)
	from := func(method, path, ip, authz, body string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		req.RemoteAddr = ip + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		d.conform(t, h, method, path, rec)
		return rec.Code
	}
	const cb = "/v1/payments/callback"
	for i := range 2 {
		if code := from(http.MethodPost, cb, "10.0.0.1", "", `{}`); code == http.StatusTooManyRequests {
			t.Fatalf("callback %d = 429 within the limit", i+1)
		}
	}
	if code := from(http.MethodPost, cb, "10.0.0.1", "", `{}`); code != http.StatusTooManyRequests {
		t.Fatalf("callback 3 = %d, want 429", code)
	}
	if code := from(http.MethodPost, cb, "10.0.0.2", "", `{}`); code == http.StatusTooManyRequests {
		t.Fatal("another address's callback refused")
	}
	const admin = "/v1/admin/explain/" + "00000000-0000-8000-8000-000000000000"
	for i := range 3 {
		if code := from(http.MethodGet, admin, "10.0.0.3", "Bearer guess", ""); code != http.StatusUnauthorized {
			t.Fatalf("admin guess %d = %d, want 401", i+1, code)
		}
	}
	if code := from(http.MethodGet, admin, "10.0.0.3", "Bearer "+testAdminToken, ""); code != http.StatusTooManyRequests {
		t.Fatalf("admin request 4 (right token) = %d, want 429: guesses spend the address's budget", code)
	}
}

// Behind a trusted proxy, clients are counted by the address the proxy
// names in X-Forwarded-For; anyone else's X-Forwarded-For is ignored (a bot
// cannot pick its own address), and so are entries left of the last
// untrusted hop.
func TestRateLimitsBehindTrustedProxies(t *testing.T) {
	a := newAuth(t)
	res := &fakeReserver{res: reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}}
	h := api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limits: api.Limits{PerIP: 2, Window: time.Minute, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}})
	user := int64(100)
	send := func(peer, xff string) int {
		user++ // a new user each time: only the address limit counts
		req := httptest.NewRequest(http.MethodPost, reservePath, nil)
		req.Header.Set("Authorization", "Bearer "+mint(t, a, user, time.Hour))
		req.Header.Set("Idempotency-Key", uuid.NewString())
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		req.RemoteAddr = peer + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	// Two clients through the same proxy each get their own budget.
	for i := range 2 {
		if code := send("10.1.1.1", "203.0.113.5"); code != http.StatusAccepted {
			t.Fatalf("client A via the proxy, request %d = %d", i+1, code)
		}
	}
	if code := send("10.1.1.1", "203.0.113.5"); code != http.StatusTooManyRequests {
		t.Fatalf("client A's third request = %d, want 429", code)
	}
	if code := send("10.2.2.2", "198.51.100.9, 10.1.1.1"); code != http.StatusAccepted {
		t.Fatalf("client B via two proxies = %d, want 202", code)
	}
	// Client A cannot escape by writing its own X-Forwarded-For entries.
	if code := send("10.1.1.1", "192.0.2.77, 203.0.113.5"); code != http.StatusTooManyRequests {
		t.Fatalf("client A with a forged left entry = %d, want 429", code)
	}
	// An untrusted peer's X-Forwarded-For is ignored: it is counted itself.
	send("198.51.100.50", "192.0.2.1")
	send("198.51.100.50", "192.0.2.2")
	if code := send("198.51.100.50", "192.0.2.3"); code != http.StatusTooManyRequests {
		t.Fatalf("untrusted peer rotating X-Forwarded-For = %d, want 429", code)
	}
}

// blockingReserver waits until its request's deadline, then fails as a
// backend that timed out would.
type blockingReserver struct{}

func (blockingReserver) Reserve(ctx context.Context, _, _, _ int64, _ uuid.UUID) (reservation.Result, error) {
	<-ctx.Done()
	return reservation.Result{}, ctx.Err()
}

// Every handler has a deadline: a backend that hangs is answered 503 by then.
func TestHandlersHaveADeadline(t *testing.T) {
	a := newAuth(t)
	h := api.NewRouter(api.Deps{Auth: a, Reserver: blockingReserver{}, Status: &fakeStatus{}, HandlerTimeout: 50 * time.Millisecond})
	start := time.Now()
	rec := serve(h, http.MethodPost, reservePath, hdr("Authorization", "Bearer "+mint(t, a, testUser, time.Hour), "Idempotency-Key", uuid.NewString()), "")
	if rec.Code != http.StatusServiceUnavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("hanging backend = %d after %s", rec.Code, time.Since(start))
	}
}

// Every admin request is logged with who (the credential's fingerprint, not
// the credential) and what; a refused one too.
func TestAdminActionsAreLogged(t *testing.T) {
	var buf bytes.Buffer
	a := newAuth(t)
	h := api.NewRouter(api.Deps{Auth: a, Reserver: &fakeReserver{}, Status: &fakeStatus{}, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	serve(h, http.MethodPost, "/v1/admin/activities", hdr("Authorization", "Bearer "+testAdminToken), `{"activity_id":0}`)
	serve(h, http.MethodPost, "/v1/admin/activities", hdr("Authorization", "Bearer wrong-token-of-some-length"), `{}`)
	out := buf.String()
	if !strings.Contains(out, `"msg":"admin.action"`) || !strings.Contains(out, `"who":"`+a.AdminName()+`"`) ||
		!strings.Contains(out, `"path":"/v1/admin/activities"`) || !strings.Contains(out, `"status":400`) {
		t.Fatalf("admin action not logged with who and what:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"api.admin_denied"`) {
		t.Fatalf("refused admin request not logged:\n%s", out)
	}
	if strings.Contains(out, testAdminToken) || strings.Contains(out, "wrong-token") {
		t.Fatalf("a credential was logged:\n%s", out)
	}
	// A valid definition names the sale and SKUs it touches, and is logged
	// even when its handler panics (this router has no PostgreSQL: 500).
	buf.Reset()
	rec := serve(h, http.MethodPost, "/v1/admin/activities", hdr("Authorization", "Bearer "+testAdminToken, "Content-Type", "application/json"),
		`{"activity_id":77,"name":"n","starts_at":"2030-01-01T00:00:00Z","ends_at":"2030-01-01T01:00:00Z",`+
			`"payment_timeout_seconds":60,"order_deadline_seconds":60,"skus":[{"sku_id":5},{"sku_id":6}]}`)
	out = buf.String()
	if rec.Code != http.StatusInternalServerError || !strings.Contains(out, `"msg":"admin.action"`) || !strings.Contains(out, `"status":500`) ||
		!strings.Contains(out, `"panicked":true`) || !strings.Contains(out, `"activity_id":77`) || !strings.Contains(out, `"sku_ids":[5,6]`) {
		t.Fatalf("answer %d; admin action of a panicking set-up not logged with what it touched:\n%s", rec.Code, out)
	}
}

func TestParseIDIsCanonical(t *testing.T) {
	for in, want := range map[string]bool{"1": true, "42": true, "9223372036854775807": true, "+1": false, "01": false,
		"0": false, "-1": false, " 1": false, "1 ": false, "1e3": false, "0x1f": false, "": false, "9223372036854775808": false} {
		if _, ok := api.ParseID(in); ok != want {
			t.Errorf("ParseID(%q) = %v, want %v", in, ok, want)
		}
	}
}

// Admin answers only the allowed addresses (counted behind trusted proxies
// by the address they name); its audit line names the operator, the real
// client address and a request id the gateway made, never the client's.
func TestAdminAllowListAndAudit(t *testing.T) {
	a, err := auth.New(auth.Options{Keys: map[int][]byte{1: []byte(testSecret)}, Current: 1, MaxTTL: time.Hour,
		AdminToken: testAdminToken, AdminTokens: map[string]string{"alice": "alice-admin-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	h := api.NewRouter(api.Deps{Auth: a, Reserver: &fakeReserver{}, Status: &fakeStatus{}, Log: slog.New(slog.NewJSONHandler(&buf, nil)),
		Limits:     api.Limits{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		AdminAllow: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	d := loadDoc(t)
	call := func(peer, xff, token, reqID string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/admin/activities", strings.NewReader(`{"activity_id":0}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Request-Id", reqID)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		req.RemoteAddr = peer + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		d.conform(t, h, http.MethodPost, "/v1/admin/activities", rec)
		return rec.Code
	}
	if code := call("203.0.113.9", "", testAdminToken, "x"); code != http.StatusForbidden {
		t.Fatalf("admin from an address off the allow-list = %d, want 403", code)
	}
	if code := call("10.1.1.1", "198.51.100.7", testAdminToken, "x"); code != http.StatusForbidden {
		t.Fatalf("admin through a trusted proxy for a client off the list = %d, want 403", code)
	}
	if code := call("203.0.113.9", "192.0.2.5", testAdminToken, "x"); code != http.StatusForbidden {
		t.Fatalf("an untrusted peer naming an allowed address in X-Forwarded-For = %d, want 403", code)
	}
	buf.Reset()
	forged := "forged-id\nadmin.action who=root"
	if code := call("10.1.1.1", "192.0.2.5", "alice-admin-token-0123456789", forged); code != http.StatusBadRequest {
		t.Fatalf("alice through the proxy = %d, want 400 (the definition is invalid)", code)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "admin.action" {
			line = m
		}
	}
	who, _ := line["who"].(string)
	if line == nil || !strings.HasPrefix(who, "alice:") || line["remote"] != "192.0.2.5" || line["peer"] != "10.1.1.1:40000" {
		t.Fatalf("admin.action = %v, want who alice:<fp>, remote 192.0.2.5, peer 10.1.1.1:40000", line)
	}
	if rid, _ := line["request"].(string); rid == "" || strings.Contains(rid, "forged") {
		t.Fatalf("request id %q: want one the gateway made", rid)
	}
	if ref, _ := line["client_request_ref"].(string); len(ref) != 16 || strings.Contains(buf.String(), "forged-id") {
		t.Fatalf("client request id logged as %q (raw in the log: %v), want a 16-hex hash", ref, strings.Contains(buf.String(), "forged-id"))
	}
}
