package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/reservation"
)

const (
	testSecret     = "unit-test-secret-of-at-least-32-bytes!!"
	testAdminToken = "unit-test-admin-token"
	testUser       = int64(4242)
)

func newAuth(t testing.TB) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Options{Keys: map[int][]byte{1: []byte(testSecret)}, Current: 1, MaxTTL: 24 * time.Hour, AdminToken: testAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mint(t testing.TB, a *auth.Authenticator, user int64, ttl time.Duration) string {
	t.Helper()
	tok, err := a.Mint(user, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// signed builds a token with arbitrary claims and method, for the cases Mint
// refuses to produce.
func signed(t testing.TB, m jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type reserveCall struct {
	user, activity, sku int64
	request             uuid.UUID
}

// fakeReserver answers a fixed result (or error, or panic) and records calls.
type fakeReserver struct {
	mu    sync.Mutex
	calls []reserveCall
	res   reservation.Result
	err   error
	panic any
}

func (f *fakeReserver) Reserve(_ context.Context, userID, activityID, skuID int64, requestID uuid.UUID) (reservation.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, reserveCall{userID, activityID, skuID, requestID})
	f.mu.Unlock()
	if f.panic != nil {
		panic(f.panic)
	}
	return f.res, f.err
}

func (f *fakeReserver) Calls() []reserveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]reserveCall(nil), f.calls...)
}

type fakeStatus struct {
	mu    sync.Mutex
	calls []reserveCall
	view  reservation.View
	err   error
	panic any
}

func (f *fakeStatus) Get(_ context.Context, userID, activityID, skuID int64, rid uuid.UUID) (reservation.View, error) {
	f.mu.Lock()
	f.calls = append(f.calls, reserveCall{userID, activityID, skuID, rid})
	f.mu.Unlock()
	if f.panic != nil {
		panic(f.panic)
	}
	return f.view, f.err
}

func (f *fakeStatus) Calls() []reserveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]reserveCall(nil), f.calls...)
}

// unit is a router on fakes; the admin set-up has no PostgreSQL or Redis, so
// any request that got past validation would panic into a 500 INTERNAL.
type unit struct {
	t    *testing.T
	auth *auth.Authenticator
	res  *fakeReserver
	st   *fakeStatus
	h    http.Handler
	doc  *doc
	tok  string // a valid token of testUser
}

func newUnit(t *testing.T) *unit {
	t.Helper()
	a := newAuth(t)
	u := &unit{t: t, auth: a, res: &fakeReserver{res: reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}},
		st: &fakeStatus{err: reservation.ErrNotFound}, doc: loadDoc(t)}
	u.h = api.NewRouter(api.Deps{Auth: a, Reserver: u.res, Status: u.st})
	u.tok = mint(t, a, testUser, time.Hour)
	return u
}

func serve(h http.Handler, method, target string, header http.Header, body string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if _, set := req.Header["Content-Type"]; body != "" && !set {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// do serves one request and checks the answer against openapi.yaml.
func (u *unit) do(method, target string, header http.Header, body string) (*httptest.ResponseRecorder, map[string]any) {
	u.t.Helper()
	rec := serve(u.h, method, target, header, body)
	path, _, _ := strings.Cut(target, "?")
	u.doc.conform(u.t, u.h, method, path, rec)
	var m map[string]any
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			u.t.Fatalf("%s %s: body %q: %v", method, target, rec.Body.String(), err)
		}
	}
	return rec, m
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func expectError(t *testing.T, rec *httptest.ResponseRecorder, m map[string]any, status int, code, field string) {
	t.Helper()
	if rec.Code != status || m["code"] != code {
		t.Fatalf("answer %d %s, want %d %s", rec.Code, rec.Body.String(), status, code)
	}
	if f, _ := m["field"].(string); f != field {
		t.Fatalf("field = %q, want %q (%s)", f, field, rec.Body.String())
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Fatalf("error without a message: %s", rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

const reservePath = "/v1/activities/11/skus/22/reservations"

func TestReserveRejectsBadInputWithoutCallingTheReserver(t *testing.T) {
	key := uuid.NewString()
	other := uuid.NewString()
	cases := []struct {
		name   string
		path   string
		header http.Header // Authorization is added unless set
		body   string
		field  string
	}{
		{name: "not JSON", body: "hello", field: "body", header: hdr("Idempotency-Key", key)},
		{name: "truncated JSON", body: `{"request_id":`, field: "body"},
		{name: "unknown field", body: `{"request_id":"` + key + `","quantity":2}`, field: "body"},
		{name: "wrong type", body: `{"request_id":5}`, field: "body"},
		{name: "null request_id", body: `{"request_id":null}`, field: "body", header: hdr("Idempotency-Key", key)},
		{name: "null body", body: `null`, field: "body", header: hdr("Idempotency-Key", key)},
		{name: "array, not an object", body: `[]`, field: "body", header: hdr("Idempotency-Key", key)},
		{name: "string, not an object", body: `"` + key + `"`, field: "body", header: hdr("Idempotency-Key", key)},
		{name: "trailing object", body: `{"request_id":"` + key + `"} {}`, field: "body"},
		{name: "trailing garbage", body: `{"request_id":"` + key + `"} x`, field: "body"},
		{name: "trailing closing brace", body: `{"request_id":"` + key + `"}}`, field: "body"},
		{name: "trailing closing bracket", body: `{"request_id":"` + key + `"}]`, field: "body"},
		{name: "no key, no body", field: "Idempotency-Key"},
		{name: "no key, empty object", body: `{}`, field: "Idempotency-Key"},
		{name: "no key, empty request_id", body: `{"request_id":""}`, field: "Idempotency-Key"},
		{name: "blank key header", header: hdr("Idempotency-Key", "   "), field: "Idempotency-Key"},
		{name: "malformed key", header: hdr("Idempotency-Key", "abc"), field: "Idempotency-Key"},
		{name: "key of 32 hex digits", header: hdr("Idempotency-Key", strings.ReplaceAll(key, "-", "")), field: "Idempotency-Key"},
		{name: "key in braces", header: hdr("Idempotency-Key", "{"+key+"}"), field: "Idempotency-Key"},
		{name: "key as urn", header: hdr("Idempotency-Key", "urn:uuid:"+key), field: "Idempotency-Key"},
		{name: "nil UUID key", header: hdr("Idempotency-Key", uuid.Nil.String()), field: "Idempotency-Key"},
		{name: "key with a bad digit", header: hdr("Idempotency-Key", "g"+key[1:]), field: "Idempotency-Key"},
		{name: "malformed body request_id", body: `{"request_id":"abc"}`, field: "request_id"},
		{name: "nil UUID body request_id", body: `{"request_id":"` + uuid.Nil.String() + `"}`, field: "request_id"},
		{name: "blank header, malformed body request_id", header: hdr("Idempotency-Key", " "), body: `{"request_id":"abc"}`, field: "request_id"},
		{name: "key and request_id disagree", header: hdr("Idempotency-Key", key), body: `{"request_id":"` + other + `"}`, field: "request_id"},
		{name: "activity_id not numeric", path: "/v1/activities/abc/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id zero", path: "/v1/activities/0/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id negative", path: "/v1/activities/-1/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id fractional", path: "/v1/activities/1.5/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id overflows int64", path: "/v1/activities/9223372036854775808/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id with a plus sign", path: "/v1/activities/+11/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "activity_id with a leading zero", path: "/v1/activities/011/skus/22/reservations", header: hdr("Idempotency-Key", key), field: "activity_id"},
		{name: "sku_id with a leading zero", path: "/v1/activities/11/skus/022/reservations", header: hdr("Idempotency-Key", key), field: "sku_id"},
		{name: "sku_id not numeric", path: "/v1/activities/11/skus/x/reservations", header: hdr("Idempotency-Key", key), field: "sku_id"},
		{name: "sku_id zero", path: "/v1/activities/11/skus/0/reservations", header: hdr("Idempotency-Key", key), field: "sku_id"},
		{name: "sku_id negative", path: "/v1/activities/11/skus/-5/reservations", header: hdr("Idempotency-Key", key), field: "sku_id"},
		{name: "path checked before body", path: "/v1/activities/x/skus/22/reservations", body: "garbage", field: "activity_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t)
			h := c.header
			if h == nil {
				h = http.Header{}
			}
			h.Set("Authorization", "Bearer "+u.tok)
			path := c.path
			if path == "" {
				path = reservePath
			}
			rec, m := u.do(http.MethodPost, path, h, c.body)
			expectError(t, rec, m, http.StatusBadRequest, "INVALID_ARGUMENT", c.field)
			if n := len(u.res.Calls()); n != 0 {
				t.Fatalf("reserver called %d times for rejected input", n)
			}
		})
	}
}

func TestUnauthenticated(t *testing.T) {
	a := newAuth(t)
	otherKey, err := auth.New(auth.Options{Keys: map[int][]byte{1: []byte("another-secret-of-at-least-32-bytes!!!!")}, Current: 1, MaxTTL: 24 * time.Hour, AdminToken: testAdminToken})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(mut func(*jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := jwt.RegisteredClaims{Issuer: auth.Issuer, Subject: fmt.Sprint(testUser), IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}
		mut(&c)
		return c
	}
	tokens := map[string]string{
		"missing":              "",
		"empty bearer":         "Bearer ",
		"garbage":              "Bearer not-a-token",
		"basic scheme":         "Basic " + mint(t, a, testUser, time.Hour),
		"no scheme":            mint(t, a, testUser, time.Hour),
		"expired":              "Bearer " + mint(t, a, testUser, -time.Minute),
		"signed by other key":  "Bearer " + mint(t, otherKey, testUser, time.Hour),
		"alg none":             "Bearer " + signed(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(func(*jwt.RegisteredClaims) {})),
		"HS512":                "Bearer " + signed(t, jwt.SigningMethodHS512, []byte(testSecret), claims(func(*jwt.RegisteredClaims) {})),
		"wrong issuer":         "Bearer " + signed(t, jwt.SigningMethodHS256, []byte(testSecret), claims(func(c *jwt.RegisteredClaims) { c.Issuer = "evil" })),
		"no expiry":            "Bearer " + signed(t, jwt.SigningMethodHS256, []byte(testSecret), claims(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil })),
		"subject not a number": "Bearer " + signed(t, jwt.SigningMethodHS256, []byte(testSecret), claims(func(c *jwt.RegisteredClaims) { c.Subject = "bob" })),
		"subject zero":         "Bearer " + signed(t, jwt.SigningMethodHS256, []byte(testSecret), claims(func(c *jwt.RegisteredClaims) { c.Subject = "0" })),
		"tampered":             "Bearer " + mint(t, a, testUser, time.Hour) + "x",
		"admin token as user":  "Bearer " + testAdminToken,
	}
	key := uuid.NewString()
	rid := uuid.NewString()
	for name, authz := range tokens {
		for _, ep := range []struct{ method, path, body string }{
			{http.MethodPost, reservePath, `{"request_id":"` + key + `"}`},
			{http.MethodPost, "/v1/activities/x/skus/y/reservations", "garbage"}, // auth comes first
			{http.MethodGet, reservePath + "/" + rid, ""},
		} {
			t.Run(name+" "+ep.method+" "+ep.path, func(t *testing.T) {
				u := newUnit(t)
				h := hdr("Idempotency-Key", key)
				if authz != "" {
					h.Set("Authorization", authz)
				}
				rec, m := u.do(ep.method, ep.path, h, ep.body)
				expectError(t, rec, m, http.StatusUnauthorized, "UNAUTHENTICATED", "")
				if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="seckill"` {
					t.Fatalf("WWW-Authenticate = %q", got)
				}
				if len(u.res.Calls())+len(u.st.Calls()) != 0 {
					t.Fatal("a backend was called for an unauthenticated request")
				}
			})
		}
	}
	// The scheme name is case-insensitive (RFC 9110 §11.1).
	u := newUnit(t)
	rec, _ := u.do(http.MethodPost, reservePath, hdr("Authorization", "bEaReR "+u.tok, "Idempotency-Key", key), "")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("lower-case scheme: %d %s", rec.Code, rec.Body.String())
	}
}

func TestReserveAcceptsTheKeyInEveryDocumentedForm(t *testing.T) {
	key := uuid.New()
	upper := strings.ToUpper(key.String())
	cases := []struct {
		name   string
		header http.Header
		body   string
	}{
		{name: "header", header: hdr("Idempotency-Key", key.String())},
		{name: "header, upper case", header: hdr("Idempotency-Key", upper)},
		{name: "body request_id", body: `{"request_id":"` + key.String() + `"}`},
		{name: "body request_id, upper case", body: `{"request_id":"` + upper + `"}`},
		{name: "header and body agree", header: hdr("Idempotency-Key", key.String()), body: `{"request_id":"` + key.String() + `"}`},
		{name: "header and body agree but for case", header: hdr("Idempotency-Key", upper), body: `{"request_id":"` + key.String() + `"}`},
		{name: "blank header, body request_id", header: hdr("Idempotency-Key", "  "), body: `{"request_id":"` + key.String() + `"}`},
		{name: "header, empty object body", header: hdr("Idempotency-Key", key.String()), body: `{}`},
		{name: "header, whitespace body", header: hdr("Idempotency-Key", key.String()), body: " \n\t "},
		{name: "body of exactly 1 KiB", header: hdr("Idempotency-Key", key.String()),
			body: `{"request_id":"` + key.String() + `"}` + strings.Repeat(" ", 1024-len(`{"request_id":"`+key.String()+`"}`))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t)
			h := c.header
			if h == nil {
				h = http.Header{}
			}
			h.Set("Authorization", "Bearer "+u.tok)
			rec, m := u.do(http.MethodPost, reservePath, h, c.body)
			if rec.Code != http.StatusAccepted || m["code"] != "QUEUED" {
				t.Fatalf("answer %d %s", rec.Code, rec.Body.String())
			}
			calls := u.res.Calls()
			if len(calls) != 1 || calls[0] != (reserveCall{testUser, 11, 22, key}) {
				t.Fatalf("reserver calls %+v, want one for user %d activity 11 sku 22 request %v", calls, testUser, key)
			}
		})
	}
}

func TestReserveOutcomes(t *testing.T) {
	rid, rid2 := uuid.New(), uuid.New()
	cases := []struct {
		name   string
		res    reservation.Result
		err    error
		panic  any
		status int
		code   string
	}{
		{name: "queued", res: reservation.Result{Code: reservation.Queued, ReservationID: rid}, status: 202, code: "QUEUED"},
		{name: "duplicate", res: reservation.Result{Code: reservation.Queued, ReservationID: rid, Duplicate: true, Status: "ORDER_CREATED"}, status: 202, code: "QUEUED"},
		{name: "sold out", res: reservation.Result{Code: reservation.SoldOut}, status: 409, code: "SOLD_OUT"},
		{name: "already reserved", res: reservation.Result{Code: reservation.AlreadyReserved, ReservationID: rid}, status: 409, code: "ALREADY_RESERVED"},
		{name: "sale limit reached", res: reservation.Result{Code: reservation.SaleLimitReached,
			Limit: &reservation.Limit{MaxPerUser: 2, Held: []uuid.UUID{rid, rid2}}}, status: 409, code: "SALE_LIMIT_REACHED"},
		{name: "not started", res: reservation.Result{Code: reservation.NotStarted}, status: 403, code: "SALE_NOT_STARTED"},
		{name: "ended", res: reservation.Result{Code: reservation.Ended}, status: 403, code: "SALE_ENDED"},
		{name: "unknown sale", res: reservation.Result{Code: reservation.UnknownSale}, status: 404, code: "UNKNOWN_SALE"},
		{name: "unknown code", res: reservation.Result{Code: "SOMETHING_NEW"}, status: 500, code: "INTERNAL"},
		{name: "reserver error", err: errors.New("redis: connection refused"), status: 503, code: "UNAVAILABLE"},
		{name: "reserver error with a result", res: reservation.Result{Code: reservation.Queued, ReservationID: rid}, err: errors.New("boom"), status: 503, code: "UNAVAILABLE"},
		{name: "reserver panics", panic: "nil map write", status: 500, code: "INTERNAL"},
		{name: "reserver panics with an error", panic: errors.New("kaboom"), status: 500, code: "INTERNAL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t)
			u.res.res, u.res.err, u.res.panic = c.res, c.err, c.panic
			key := uuid.New()
			var rec *httptest.ResponseRecorder
			var m map[string]any
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("panic escaped the router: %v", v)
					}
				}()
				rec, m = u.do(http.MethodPost, reservePath, hdr("Authorization", "Bearer "+u.tok, "Idempotency-Key", key.String()), "")
			}()
			if rec.Code != c.status || m["code"] != c.code {
				t.Fatalf("answer %d %s, want %d %s", rec.Code, rec.Body.String(), c.status, c.code)
			}
			if calls := u.res.Calls(); len(calls) != 1 || calls[0] != (reserveCall{testUser, 11, 22, key}) {
				t.Fatalf("reserver calls %+v", calls)
			}
			switch c.code {
			case "QUEUED":
				want := fmt.Sprintf("%s/%s", reservePath, rid)
				if m["reservation_id"] != rid.String() || m["status_url"] != want {
					t.Fatalf("queued answer %v, want reservation %v at %s", m, rid, want)
				}
			case "ALREADY_RESERVED":
				if m["reservation_id"] != rid.String() {
					t.Fatalf("already reserved answer %v lacks the held reservation %v", m, rid)
				}
			case "SALE_LIMIT_REACHED":
				if m["max_per_user"] != float64(2) || fmt.Sprint(m["held_reservation_ids"]) != fmt.Sprint([]any{rid.String(), rid2.String()}) {
					t.Fatalf("sale limit answer %v lacks the cap 2 and the held reservations %v %v", m, rid, rid2)
				}
			default:
				if _, has := m["reservation_id"]; has {
					t.Fatalf("%s answer names a reservation: %v", c.code, m)
				}
				if strings.Contains(rec.Body.String(), "redis") || strings.Contains(rec.Body.String(), "kaboom") {
					t.Fatalf("internal detail leaked to the client: %s", rec.Body.String())
				}
			}
		})
	}
}

func TestGetReservation(t *testing.T) {
	rid := uuid.New()
	oid := uuid.New()
	deadline := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	path := reservePath + "/" + rid.String()

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct{ path, field string }{
			{"/v1/activities/x/skus/22/reservations/" + rid.String(), "activity_id"},
			{"/v1/activities/0/skus/22/reservations/" + rid.String(), "activity_id"},
			{"/v1/activities/11/skus/-2/reservations/" + rid.String(), "sku_id"},
			{"/v1/activities/11/skus/22/reservations/not-a-uuid", "reservation_id"},
			{"/v1/activities/11/skus/22/reservations/123", "reservation_id"},
			{"/v1/activities/11/skus/22/reservations/" + rid.String() + "0", "reservation_id"},
		} {
			u := newUnit(t)
			rec, m := u.do(http.MethodGet, c.path, hdr("Authorization", "Bearer "+u.tok), "")
			expectError(t, rec, m, http.StatusBadRequest, "INVALID_ARGUMENT", c.field)
			if len(u.st.Calls()) != 0 {
				t.Fatalf("%s: status reader called", c.path)
			}
		}
	})
	for _, c := range []struct {
		name   string
		view   reservation.View
		err    error
		panic  any
		status int
		code   string
	}{
		{name: "queued", view: reservation.View{ReservationID: rid, Status: "QUEUED", ReservationStatus: "RESERVED", BusinessDeadline: deadline, Source: "redis"}, status: 200},
		{name: "paid", view: reservation.View{ReservationID: rid, Status: "PAID", ReservationStatus: "ORDER_CREATED", OrderID: &oid, OrderStatus: "PAID", BusinessDeadline: deadline, Source: "postgres"}, status: 200},
		{name: "rejected", view: reservation.View{ReservationID: rid, Status: "REJECTED", ReservationStatus: "COMPENSATED", ReasonCode: "DEADLINE", BusinessDeadline: deadline, Source: "postgres"}, status: 200},
		{name: "not found or not yours", err: reservation.ErrNotFound, status: 404, code: "NOT_FOUND"},
		{name: "wrapped not found", err: fmt.Errorf("x: %w", reservation.ErrNotFound), status: 404, code: "NOT_FOUND"},
		{name: "backend error", err: errors.New("pg down"), status: 503, code: "UNAVAILABLE"},
		{name: "panic", panic: "boom", status: 500, code: "INTERNAL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t)
			u.st.view, u.st.err, u.st.panic = c.view, c.err, c.panic
			rec, m := u.do(http.MethodGet, path, hdr("Authorization", "Bearer "+u.tok), "")
			if rec.Code != c.status {
				t.Fatalf("answer %d %s, want %d", rec.Code, rec.Body.String(), c.status)
			}
			if calls := u.st.Calls(); len(calls) != 1 || calls[0] != (reserveCall{testUser, 11, 22, rid}) {
				t.Fatalf("status reader calls %+v", calls)
			}
			if c.status != 200 {
				expectError(t, rec, m, c.status, c.code, "")
				return
			}
			want, _ := json.Marshal(c.view)
			var wantM map[string]any
			_ = json.Unmarshal(want, &wantM)
			if fmt.Sprint(wantM) != fmt.Sprint(m) {
				t.Fatalf("view %v, want %v", m, wantM)
			}
		})
	}
}

func validActivity() map[string]any {
	return map[string]any{"activity_id": 1001, "name": "Spring sale", "starts_at": "2026-03-01T10:00:00Z",
		"ends_at": "2026-03-01T11:00:00Z", "payment_timeout_seconds": 900, "order_deadline_seconds": 300,
		"skus": []any{map[string]any{"sku_id": 7, "stock": 100, "price_cents": 1999}}}
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAdminSetupRejections(t *testing.T) {
	with := func(mut func(a map[string]any)) string {
		a := validActivity()
		mut(a)
		return jsonOf(t, a)
	}
	t.Run("credentials", func(t *testing.T) {
		for name, authz := range map[string]string{
			"missing":        "",
			"user token":     "Bearer " + mint(t, newAuth(t), testUser, time.Hour),
			"wrong token":    "Bearer " + testAdminToken + "x",
			"prefix of it":   "Bearer " + testAdminToken[:10],
			"no scheme":      testAdminToken,
			"basic scheme":   "Basic " + testAdminToken,
			"empty bearer":   "Bearer ",
			"garbage bearer": "Bearer ???",
		} {
			u := newUnit(t)
			h := http.Header{}
			if authz != "" {
				h.Set("Authorization", authz)
			}
			// A valid definition: reaching set-up would hit the nil pool (500).
			rec, m := u.do(http.MethodPost, "/v1/admin/activities", h, jsonOf(t, validActivity()))
			if rec.Code != http.StatusUnauthorized || m["code"] != "UNAUTHENTICATED" {
				t.Fatalf("%s: answer %d %s", name, rec.Code, rec.Body.String())
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="seckill-admin"` {
				t.Fatalf("%s: WWW-Authenticate = %q", name, got)
			}
		}
	})
	cases := []struct {
		name, body, field string
	}{
		{"empty body", "", "body"},
		{"blank body", "  \n", "body"},
		{"not JSON", "{", "body"},
		{"array", "[]", "body"},
		{"unknown field", with(func(a map[string]any) { a["discount"] = 5 }), "body"},
		{"unknown sku field", with(func(a map[string]any) { a["skus"].([]any)[0].(map[string]any)["colour"] = "red" }), "body"},
		{"wrong type", with(func(a map[string]any) { a["activity_id"] = "1001" }), "body"},
		{"bad time", with(func(a map[string]any) { a["starts_at"] = "tomorrow" }), "body"},
		{"trailing data", jsonOf(t, validActivity()) + "{}", "body"},
		{"null", "null", "body"},
		{"null field", with(func(a map[string]any) { a["name"] = nil }), "body"},
		{"null sku field", with(func(a map[string]any) { a["skus"].([]any)[0].(map[string]any)["price_cents"] = nil }), "body"},
		{"null sku", with(func(a map[string]any) { a["skus"] = []any{nil} }), "body"},
		{"empty object", "{}", "activity_id"},
		{"activity_id zero", with(func(a map[string]any) { a["activity_id"] = 0 }), "activity_id"},
		{"name empty", with(func(a map[string]any) { a["name"] = "" }), "name"},
		{"name too long", with(func(a map[string]any) { a["name"] = strings.Repeat("n", 201) }), "name"},
		{"name of 201 characters", with(func(a map[string]any) { a["name"] = strings.Repeat("é", 201) }), "name"},
		{"name with a NUL", with(func(a map[string]any) { a["name"] = "flash\u0000sale" }), "name"},
		{"name with a newline", with(func(a map[string]any) { a["name"] = "flash\nsale" }), "name"},
		{"starts_at missing", with(func(a map[string]any) { delete(a, "starts_at") }), "starts_at"},
		{"starts_at year 1", with(func(a map[string]any) { a["starts_at"] = "0001-01-01T00:00:00Z" }), "starts_at"},
		{"starts_at before 1970", with(func(a map[string]any) { a["starts_at"] = "1969-12-31T23:59:59Z" }), "starts_at"},
		{"ends_at missing", with(func(a map[string]any) { delete(a, "ends_at") }), "ends_at"},
		{"ends_at before starts_at", with(func(a map[string]any) { a["ends_at"] = "2026-03-01T09:00:00Z" }), "ends_at"},
		{"ends_at equals starts_at", with(func(a map[string]any) { a["ends_at"] = a["starts_at"] }), "ends_at"},
		{"payment timeout zero", with(func(a map[string]any) { a["payment_timeout_seconds"] = 0 }), "payment_timeout_seconds"},
		{"payment timeout too long", with(func(a map[string]any) { a["payment_timeout_seconds"] = 86401 }), "payment_timeout_seconds"},
		{"order deadline zero", with(func(a map[string]any) { a["order_deadline_seconds"] = 0 }), "order_deadline_seconds"},
		{"currency empty", with(func(a map[string]any) { a["currency"] = "" }), "currency"},
		{"currency lower case", with(func(a map[string]any) { a["currency"] = "eur" }), "currency"},
		{"currency null", with(func(a map[string]any) { a["currency"] = nil }), "body"},
		{"no skus", with(func(a map[string]any) { a["skus"] = []any{} }), "skus"},
		{"sku id zero", with(func(a map[string]any) { a["skus"] = []any{map[string]any{"sku_id": 0, "stock": 1}} }), "skus[0].sku_id"},
		{"duplicate sku ids", with(func(a map[string]any) {
			a["skus"] = []any{map[string]any{"sku_id": 7, "stock": 1}, map[string]any{"sku_id": 7, "stock": 2}}
		}), "skus[1].sku_id"},
		{"negative stock", with(func(a map[string]any) {
			a["skus"] = []any{map[string]any{"sku_id": 7, "stock": 1}, map[string]any{"sku_id": 8, "stock": -1}}
		}), "skus[1].stock"},
		{"stock too large", with(func(a map[string]any) { a["skus"] = []any{map[string]any{"sku_id": 7, "stock": 10_000_001}} }), "skus[0].stock"},
		{"negative price", with(func(a map[string]any) { a["skus"] = []any{map[string]any{"sku_id": 7, "stock": 1, "price_cents": -1}} }), "skus[0].price_cents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := newUnit(t)
			rec, m := u.do(http.MethodPost, "/v1/admin/activities", hdr("Authorization", "Bearer "+testAdminToken), c.body)
			expectError(t, rec, m, http.StatusBadRequest, "INVALID_ARGUMENT", c.field)
		})
	}
}

func TestRoutingErrorsAreJSON(t *testing.T) {
	rid := uuid.NewString()
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/", 404, "NOT_FOUND", ""},
		{http.MethodGet, "/nope", 404, "NOT_FOUND", ""},
		{http.MethodGet, "/v1", 404, "NOT_FOUND", ""},
		{http.MethodGet, "/v1/nope", 404, "NOT_FOUND", ""},
		{http.MethodPost, "/v1/activities/1/skus/2", 404, "NOT_FOUND", ""},
		{http.MethodGet, "/v1/activities/1/skus/2/reservations/" + rid + "/extra", 404, "NOT_FOUND", ""},
		{"BREW", "/nope", 404, "NOT_FOUND", ""},
		{http.MethodGet, reservePath, 405, "METHOD_NOT_ALLOWED", "POST"},
		{http.MethodPut, reservePath, 405, "METHOD_NOT_ALLOWED", "POST"},
		{http.MethodDelete, reservePath + "/" + rid, 405, "METHOD_NOT_ALLOWED", "GET"},
		{http.MethodPost, reservePath + "/" + rid, 405, "METHOD_NOT_ALLOWED", "GET"},
		{http.MethodGet, "/v1/admin/activities", 405, "METHOD_NOT_ALLOWED", "POST"},
		{http.MethodPost, "/healthz", 405, "METHOD_NOT_ALLOWED", "GET"},
		{http.MethodHead, "/healthz", 405, "METHOD_NOT_ALLOWED", "GET"},
		{"BREW", "/healthz", 405, "METHOD_NOT_ALLOWED", "GET"},
		{http.MethodDelete, "/v1/openapi.yaml", 405, "METHOD_NOT_ALLOWED", "GET"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			u := newUnit(t)
			// No credentials: routing errors come before authentication.
			rec, m := u.do(c.method, c.path, nil, "")
			expectError(t, rec, m, c.status, c.code, "")
			if got := rec.Header().Get("Allow"); got != c.allow {
				t.Fatalf("Allow = %q, want %q", got, c.allow)
			}
			if len(u.res.Calls())+len(u.st.Calls()) != 0 {
				t.Fatal("a backend was called")
			}
		})
	}
}

func TestOperationalEndpoints(t *testing.T) {
	d := loadDoc(t)
	h := fullRouter(t)
	rec := serve(h, http.MethodGet, "/healthz", nil, "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /healthz = %d", rec.Code)
	}
	d.conform(t, h, http.MethodGet, "/healthz", rec)
	// /metrics is not on the public listener (the metrics listener serves it).
	u := newUnit(t)
	rec, m := u.do(http.MethodGet, "/metrics", nil, "")
	expectError(t, rec, m, http.StatusNotFound, "NOT_FOUND", "")
}

// A nil logger must not turn the recoverer itself into a panic.
func TestNilLoggerPanicStillAnswersJSON(t *testing.T) {
	res := &fakeReserver{panic: "boom"}
	h := api.NewRouter(api.Deps{Auth: newAuth(t), Reserver: res, Status: &fakeStatus{}})
	tok := mint(t, newAuth(t), testUser, time.Hour)
	rec := serve(h, http.MethodPost, reservePath, hdr("Authorization", "Bearer "+tok, "Idempotency-Key", uuid.NewString()), "")
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"INTERNAL"`) {
		t.Fatalf("answer %d %s", rec.Code, rec.Body.String())
	}
}

// http.ErrAbortHandler is the one panic that is meant to reach net/http: it
// aborts the response instead of answering.
func TestAbortHandlerPanicAbortsTheResponse(t *testing.T) {
	res := &fakeReserver{panic: http.ErrAbortHandler}
	a := newAuth(t)
	srv := httptest.NewServer(api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{}}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+reservePath, nil)
	req.Header.Set("Authorization", "Bearer "+mint(t, a, testUser, time.Hour))
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("aborted handler answered %d", resp.StatusCode)
	}
}
