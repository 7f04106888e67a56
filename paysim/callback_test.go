package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// paidSim is a simulator with a fake clock and fake timers, a merchant
// answering respond(n), and one payment created for it.
func paidSim(t *testing.T, opts Options, respond func(int) int) (*sim, *merchant, *fakeTimers, *fakeClock, Payment) {
	t.Helper()
	clock := newFakeClock()
	timers := newFakeTimers()
	opts.Clock, opts.After = clock.Now, timers.After
	s := newSim(t, opts)
	m := newMerchant(t, clock.Now, respond)
	p, err := s.client.Create(context.Background(), uuid.New(), 4999, "CNY", m.url())
	if err != nil {
		t.Fatal(err)
	}
	return s, m, timers, clock, p
}

func TestCallbackRetriedUntilAcked(t *testing.T) {
	s, m, timers, clock, p := paidSim(t, Options{}, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	paid, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{})
	if err != nil {
		t.Fatal(err)
	}

	first := m.next(t)
	if w := timers.next(t); w.d != 200*time.Millisecond {
		t.Fatalf("first backoff %v, want 200ms", w.d)
	} else {
		clock.Advance(time.Second) // each attempt is stamped anew
		w.fire()
	}
	second := m.next(t)
	if w := timers.next(t); w.d != 400*time.Millisecond {
		t.Fatalf("second backoff %v, want 400ms", w.d)
	} else {
		clock.Advance(time.Second)
		w.fire()
	}
	third := m.next(t)
	eventually(t, "the ack to be counted", func() bool { return s.srv.Stats().Callbacks.InFlight == 0 })
	timers.none(t)
	m.none(t)

	for _, r := range []received{second, third} {
		if r.id != first.id || !bytes.Equal(r.body, first.body) {
			t.Errorf("attempt %d: id %q body %s, want the first's %q %s", r.n, r.id, r.body, first.id, first.body)
		}
	}
	if first.ts == second.ts || second.ts == third.ts {
		t.Errorf("timestamps %s %s %s: want one per attempt", first.ts, second.ts, third.ts)
	}
	if want := strconv.FormatInt(clock.Now().Unix(), 10); third.ts != want {
		t.Errorf("third timestamp %s, want %s", third.ts, want)
	}
	if !strings.HasPrefix(first.id, "evt_") {
		t.Errorf("webhook-id %q", first.id)
	}
	var ev Event
	if err := json.Unmarshal(first.body, &ev); err != nil {
		t.Fatal(err)
	}
	want := Event{Type: EventPaymentSucceeded, EventID: first.id, TransactionID: p.TransactionID,
		MerchantOrderID: p.MerchantOrderID, AmountCents: 4999, Currency: "CNY", PaidAt: *paid.PaidAt}
	if ev != want {
		t.Errorf("event %+v, want %+v", ev, want)
	}
	var raw map[string]any
	_ = json.Unmarshal(first.body, &raw)
	if raw["paid_at"] != paid.PaidAt.Format(time.RFC3339Nano) {
		t.Errorf("paid_at %v, want RFC3339Nano %s", raw["paid_at"], paid.PaidAt.Format(time.RFC3339Nano))
	}

	st := s.srv.Stats().Callbacks
	if st != (CallbackStats{Events: 1, Deliveries: 1, Sent: 3, Acked: 1, Failed: 2}) {
		t.Errorf("stats %+v", st)
	}

	// Paying again is idempotent: no new event.
	if _, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{}); err != nil {
		t.Fatal(err)
	}
	m.none(t)
	timers.none(t)
	if got := s.srv.Stats().Callbacks.Events; got != 1 {
		t.Errorf("events after a second pay: %d", got)
	}
}

func TestCallbackBackoffCappedAndGivenUp(t *testing.T) {
	opts := Options{MaxCallbackAttempts: 5, CallbackBackoff: 4 * time.Second, MaxCallbackBackoff: 10 * time.Second}
	// The merchant does not know the order: 404 is retried like any non-2xx.
	s, m, timers, _, p := paidSim(t, opts, func(int) int { return http.StatusNotFound })
	if _, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{}); err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	m.next(t)
	for range 4 {
		w := timers.next(t)
		waits = append(waits, w.d)
		w.fire()
		m.next(t)
	}
	eventually(t, "give up", func() bool { return s.srv.Stats().Callbacks.GivenUp == 1 })
	timers.none(t)
	m.none(t)
	want := []time.Duration{4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", waits, want)
		}
	}
	if st := s.srv.Stats().Callbacks; st != (CallbackStats{Events: 1, Deliveries: 1, Sent: 5, Failed: 5, GivenUp: 1}) {
		t.Errorf("stats %+v", st)
	}
}

func TestCallbackDuplicates(t *testing.T) {
	s, m, timers, _, p := paidSim(t, Options{}, nil)
	if _, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{Duplicates: 2}); err != nil {
		t.Fatal(err)
	}
	first := m.next(t) // no delay: the first copy goes at once
	// The duplicates wait 5ms and 10ms (in whatever order their goroutines ask).
	a, b := timers.next(t), timers.next(t)
	if a.d > b.d {
		a, b = b, a
	}
	if a.d != 5*time.Millisecond || b.d != 10*time.Millisecond {
		t.Fatalf("duplicate waits %v %v, want 5ms and 10ms", a.d, b.d)
	}
	a.fire()
	b.fire()
	rs := []received{first, m.next(t), m.next(t)}
	eventually(t, "acks", func() bool { return s.srv.Stats().Callbacks.InFlight == 0 })
	m.none(t)
	for _, r := range rs[1:] {
		if r.id != first.id || !bytes.Equal(r.body, first.body) {
			t.Errorf("duplicate differs: %q %s vs %q %s", r.id, r.body, first.id, first.body)
		}
	}
	if st := s.srv.Stats().Callbacks; st != (CallbackStats{Events: 1, Deliveries: 3, Sent: 3, Acked: 3}) {
		t.Errorf("stats %+v", st)
	}
}

func TestCallbackDelay(t *testing.T) {
	s, m, timers, _, p := paidSim(t, Options{}, nil)
	if _, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{CallbackDelayMS: 1500}); err != nil {
		t.Fatal(err)
	}
	w := timers.next(t)
	if w.d != 1500*time.Millisecond {
		t.Fatalf("delay %v, want 1.5s", w.d)
	}
	// The delivery is parked on the timer: nothing can have been sent.
	m.none(t)
	if st := s.srv.Stats().Callbacks; st.Sent != 0 || st.InFlight != 1 {
		t.Fatalf("before the delay: %+v", st)
	}
	w.fire()
	m.next(t)
}

// A delayed callback arrives after a later event's callback, and after the
// merchant has already lost a close race for it.
func TestCallbacksOutOfOrderAcrossEvents(t *testing.T) {
	s, m, timers, _, a := paidSim(t, Options{}, nil)
	ctx := context.Background()
	b, err := s.client.Create(ctx, uuid.New(), 100, "CNY", m.url())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Pay(ctx, a.TransactionID, PayOptions{CallbackDelayMS: 300}); err != nil {
		t.Fatal(err)
	}
	wa := timers.next(t)
	if _, err := s.client.Pay(ctx, b.TransactionID, PayOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Close(ctx, a.TransactionID); err == nil {
		t.Fatal("close of a paid payment succeeded")
	}
	got1 := m.next(t)
	wa.fire()
	got2 := m.next(t)
	var e1, e2 Event
	_ = json.Unmarshal(got1.body, &e1)
	_ = json.Unmarshal(got2.body, &e2)
	if e1.TransactionID != b.TransactionID || e2.TransactionID != a.TransactionID {
		t.Fatalf("arrival order %s, %s; want %s (undelayed) then %s", e1.TransactionID, e2.TransactionID, b.TransactionID, a.TransactionID)
	}
}

func TestCallbackReorderSendsDuplicatesFirst(t *testing.T) {
	s, m, timers, _, p := paidSim(t, Options{}, nil)
	if _, err := s.client.Pay(context.Background(), p.TransactionID, PayOptions{CallbackDelayMS: 1000, Duplicates: 2, Reorder: true}); err != nil {
		t.Fatal(err)
	}
	// Duplicate 1 goes at once; duplicate 2 waits 5ms; the first copy 1s.
	m.next(t)
	w1, w2 := timers.next(t), timers.next(t)
	if w1.d > w2.d {
		w1, w2 = w2, w1
	}
	if w1.d != 5*time.Millisecond || w2.d != time.Second {
		t.Fatalf("waits %v %v, want 5ms and 1s", w1.d, w2.d)
	}
	w1.fire()
	m.next(t)
	m.none(t)
	w2.fire()
	m.next(t)
}

func TestCloseStopsDeliveriesWithoutLeaks(t *testing.T) {
	// Let goroutines of earlier tests wind down before taking the baseline.
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	func() {
		stuck := make(chan struct{}, 10)
		blocking := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // so that a closed connection cancels r.Context()
			stuck <- struct{}{}
			<-r.Context().Done() // never answers; the attempt is in flight
		}))
		t.Cleanup(blocking.Close)
		failing := newMerchant(t, time.Now, func(int) int { return http.StatusServiceUnavailable })

		srv, err := New(Options{Secret: testSecret, MerchantKey: testKey, CallbackBackoff: time.Hour, CallbackTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		pay := func(url string, opts PayOptions) {
			order := uuid.New()
			rec := doHandler(t, srv, "POST", "/v1/payments", `{"merchant_order_id":"`+order.String()+`","amount_cents":1,"currency":"CNY","callback_url":"`+url+`"}`)
			var p Payment
			_ = json.Unmarshal(rec, &p)
			b, _ := json.Marshal(opts)
			doHandler(t, srv, "POST", "/v1/payments/"+p.TransactionID+"/pay", string(b))
		}
		pay(blocking.URL+"/cb", PayOptions{})                   // in flight
		pay(failing.url(), PayOptions{})                        // waiting an hour of backoff
		pay(failing.url(), PayOptions{CallbackDelayMS: 3600e3}) // waiting an hour of delay
		<-stuck
		failing.next(t)
		eventually(t, "the failure to be counted", func() bool { return srv.Stats().Callbacks.Failed == 1 })

		done := make(chan struct{})
		go func() { srv.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return")
		}
		srv.Close() // idempotent

		// After Close a payment still works but sends nothing.
		pay(failing.url(), PayOptions{})
		if st := srv.Stats(); st.Payments[StatusPaid] != 4 || st.Callbacks.Events != 4 || st.Callbacks.Deliveries != 3 {
			t.Errorf("stats after close %+v", st)
		}
		failing.none(t)
		blocking.Close()
		failing.ts.Close()
	}()

	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		leaked := strings.Contains(stacks, "paysim.(*Server).deliver")
		n := runtime.NumGoroutine()
		if !leaked && n <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before, %d after; deliver still running: %v\n%s", before, n, leaked, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// doHandler calls the handler in-process and returns the body of a 2xx.
func doHandler(t *testing.T, s *Server, method, path, body string) []byte {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set(HeaderMerchantKey, testKey)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes()
}
