package paysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

var testSecret = []byte("test-secret-0123456789abcdef0123")

const testKey = "test-merchant-key"

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeTimers replaces time.After: every wait is reported on reqs and lasts
// until the test fires it.
type fakeTimers struct{ reqs chan timerReq }

type timerReq struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeTimers() *fakeTimers { return &fakeTimers{reqs: make(chan timerReq, 1000)} }

func (f *fakeTimers) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	f.reqs <- timerReq{d: d, ch: ch}
	return ch
}

// next returns the next wait a delivery started.
func (f *fakeTimers) next(t *testing.T) timerReq {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no timer was started")
		return timerReq{}
	}
}

func (f *fakeTimers) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-f.reqs:
		t.Fatalf("unexpected timer of %v", r.d)
	default:
	}
}

func (r timerReq) fire() { r.ch <- time.Time{} }

// sim is a Server behind an httptest server, with a Client on it.
type sim struct {
	srv    *Server
	ts     *httptest.Server
	client *Client
}

func newSim(t *testing.T, opts Options) *sim {
	t.Helper()
	if opts.Secret == nil {
		opts.Secret = testSecret
	}
	if opts.MerchantKey == "" {
		opts.MerchantKey = testKey
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return &sim{srv: s, ts: ts, client: &Client{BaseURL: ts.URL, MerchantKey: opts.MerchantKey, HTTP: ts.Client()}}
}

// call makes a raw request; key "" sends no merchant key.
func (s *sim) call(t *testing.T, method, path, body, key string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequest(method, s.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(HeaderMerchantKey, key)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: decoding: %v", method, path, err)
	}
	return resp.StatusCode, m
}

// received is one callback as the test merchant saw it.
type received struct {
	n         int // 1-based arrival number
	id        string
	ts        string
	sig       string
	body      []byte
	verifyErr error
}

// merchant is a test merchant that verifies every callback and answers with
// respond(n) for the n-th arrival (default 200).
type merchant struct {
	ts      *httptest.Server
	got     chan received
	mu      sync.Mutex
	n       int
	respond func(n int) int
}

func newMerchant(t *testing.T, now func() time.Time, respond func(n int) int) *merchant {
	t.Helper()
	m := &merchant{got: make(chan received, 1000), respond: respond}
	m.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.n++
		n := m.n
		m.mu.Unlock()
		status := http.StatusOK
		if m.respond != nil {
			status = m.respond(n)
		}
		if r.Header.Get("Content-Type") != "application/json" || r.Method != http.MethodPost {
			status = http.StatusUnsupportedMediaType
		}
		m.got <- received{n: n, id: r.Header.Get(HeaderWebhookID), ts: r.Header.Get(HeaderWebhookTimestamp),
			sig: r.Header.Get(HeaderWebhookSignature), body: body,
			verifyErr: VerifyHeaders(testSecret, r.Header, body, now(), time.Minute)}
		w.WriteHeader(status)
	}))
	t.Cleanup(m.ts.Close)
	return m
}

func (m *merchant) url() string { return m.ts.URL + "/v1/payments/callback" }

func (m *merchant) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-m.got:
		if r.verifyErr != nil {
			t.Errorf("callback %d does not verify: %v", r.n, r.verifyErr)
		}
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no callback arrived")
		return received{}
	}
}

func (m *merchant) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-m.got:
		t.Fatalf("unexpected callback %d", r.n)
	default:
	}
}

// eventually polls cond (for state that settles after a response is sent).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
