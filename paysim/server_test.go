package paysim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{MerchantKey: "k"}); err == nil {
		t.Error("New without Secret: want error")
	}
	if _, err := New(Options{Secret: testSecret}); err == nil {
		t.Error("New without MerchantKey: want error")
	}
}

// setup brings a fresh payment to state (with "" no payment is created).
func setup(t *testing.T, s *sim, m *merchant, state Status) (txn string, order uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	order = uuid.New()
	if state == "" {
		return "txn_" + uuid.NewString(), order
	}
	p, err := s.client.Create(ctx, order, 4999, "CNY", m.url())
	if err != nil {
		t.Fatal(err)
	}
	switch state {
	case StatusPaid, StatusRefunded:
		if _, err := s.client.Pay(ctx, p.TransactionID, PayOptions{}); err != nil {
			t.Fatal(err)
		}
		if state == StatusRefunded {
			if _, err := s.client.Refund(ctx, p.TransactionID, "r1", 4999); err != nil {
				t.Fatal(err)
			}
		}
	case StatusClosed:
		if _, err := s.client.Close(ctx, p.TransactionID); err != nil {
			t.Fatal(err)
		}
	}
	return p.TransactionID, order
}

func TestEndpoints(t *testing.T) {
	const (
		k  = testKey
		no = ""
	)
	cases := []struct {
		name   string
		state  Status // state of the payment before the call; "" = unknown txn
		method string
		path   string // {txn} and {order} are replaced
		body   string // {order} and {url} are replaced
		key    string
		status int
		code   string // error code, or "" for a payment answer
		after  Status // payment status in the answer (and in the store)
		events int64  // payment.succeeded events created in total
	}{
		{"create new", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, k, 201, "", StatusPending, 0},
		{"create same order again", StatusPending, "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, k, 200, "", StatusPending, 0},
		{"create same order after close", StatusClosed, "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, k, 200, "", StatusClosed, 0},
		{"create same order other amount", StatusPending, "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":5000,"currency":"CNY","callback_url":"{url}"}`, k, 409, CodeAmountMismatch, StatusPending, 0},
		{"create same order other currency", StatusPending, "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"JPY","callback_url":"{url}"}`, k, 409, CodeAmountMismatch, StatusPending, 0},
		{"create no currency", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"callback_url":"{url}"}`, k, 400, CodeBadRequest, "", 0},
		{"create bad order id", "", "POST", "/v1/payments", `{"merchant_order_id":"nope","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, k, 400, CodeBadRequest, "", 0},
		{"create zero amount", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":0,"currency":"CNY","callback_url":"{url}"}`, k, 400, CodeBadRequest, "", 0},
		{"create relative callback", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":1,"currency":"CNY","callback_url":"/cb"}`, k, 400, CodeBadRequest, "", 0},
		{"create bad json", "", "POST", "/v1/payments", `{`, k, 400, CodeBadRequest, "", 0},
		{"create no key", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, no, 401, CodeUnauthorized, "", 0},
		{"create wrong key", "", "POST", "/v1/payments", `{"merchant_order_id":"{order}","amount_cents":4999,"currency":"CNY","callback_url":"{url}"}`, "wrong", 401, CodeUnauthorized, "", 0},

		{"get pending", StatusPending, "GET", "/v1/payments/{txn}", "", k, 200, "", StatusPending, 0},
		{"get refunded", StatusRefunded, "GET", "/v1/payments/{txn}", "", k, 200, "", StatusRefunded, 1},
		{"get unknown", "", "GET", "/v1/payments/{txn}", "", k, 404, CodeNotFound, "", 0},
		{"get no key", StatusPending, "GET", "/v1/payments/{txn}", "", no, 401, CodeUnauthorized, StatusPending, 0},
		{"find by order", StatusPaid, "GET", "/v1/payments?merchant_order_id={order}", "", k, 200, "", StatusPaid, 1},
		{"find unknown order", "", "GET", "/v1/payments?merchant_order_id={order}", "", k, 404, CodeNotFound, "", 0},
		{"find bad order", "", "GET", "/v1/payments?merchant_order_id=x", "", k, 400, CodeBadRequest, "", 0},

		{"pay pending", StatusPending, "POST", "/v1/payments/{txn}/pay", "", no, 200, "", StatusPaid, 1},
		{"pay pending with options", StatusPending, "POST", "/v1/payments/{txn}/pay", `{"callback_delay_ms":0,"duplicates":0,"reorder":false}`, no, 200, "", StatusPaid, 1},
		{"pay paid is idempotent", StatusPaid, "POST", "/v1/payments/{txn}/pay", "", no, 200, "", StatusPaid, 1},
		{"pay refunded is idempotent", StatusRefunded, "POST", "/v1/payments/{txn}/pay", "", no, 200, "", StatusRefunded, 1},
		{"pay closed", StatusClosed, "POST", "/v1/payments/{txn}/pay", "", no, 409, CodePaymentClosed, StatusClosed, 0},
		{"pay unknown", "", "POST", "/v1/payments/{txn}/pay", "", no, 404, CodeNotFound, "", 0},
		{"pay unknown option", StatusPending, "POST", "/v1/payments/{txn}/pay", `{"callback_delay":5}`, no, 400, CodeBadRequest, StatusPending, 0},
		{"pay negative delay", StatusPending, "POST", "/v1/payments/{txn}/pay", `{"callback_delay_ms":-1}`, no, 400, CodeBadRequest, StatusPending, 0},

		{"close pending", StatusPending, "POST", "/v1/payments/{txn}/close", "", k, 200, "", StatusClosed, 0},
		{"close closed is idempotent", StatusClosed, "POST", "/v1/payments/{txn}/close", "", k, 200, "", StatusClosed, 0},
		{"close paid", StatusPaid, "POST", "/v1/payments/{txn}/close", "", k, 409, CodeAlreadyPaid, StatusPaid, 1},
		{"close refunded", StatusRefunded, "POST", "/v1/payments/{txn}/close", "", k, 409, CodeAlreadyPaid, StatusRefunded, 1},
		{"close unknown", "", "POST", "/v1/payments/{txn}/close", "", k, 404, CodeNotFound, "", 0},
		{"close no key", StatusPending, "POST", "/v1/payments/{txn}/close", "", no, 401, CodeUnauthorized, StatusPending, 0},

		{"refund paid", StatusPaid, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, k, 200, "", StatusRefunded, 1},
		{"refund paid, amount 0 = full", StatusPaid, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1"}`, k, 200, "", StatusRefunded, 1},
		{"refund same refund_id is idempotent", StatusRefunded, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, k, 200, "", StatusRefunded, 1},
		{"refund other refund_id", StatusRefunded, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r2","amount_cents":4999}`, k, 409, CodeAlreadyRefunded, StatusRefunded, 1},
		{"refund pending", StatusPending, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, k, 409, CodeNotPaid, StatusPending, 0},
		{"refund closed", StatusClosed, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, k, 409, CodeNotPaid, StatusClosed, 0},
		{"refund partial", StatusPaid, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":100}`, k, 409, CodeAmountMismatch, StatusPaid, 1},
		{"refund no refund_id", StatusPaid, "POST", "/v1/payments/{txn}/refund", `{"amount_cents":4999}`, k, 400, CodeBadRequest, StatusPaid, 1},
		{"refund unknown", "", "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, k, 404, CodeNotFound, "", 0},
		{"refund no key", StatusPaid, "POST", "/v1/payments/{txn}/refund", `{"refund_id":"r1","amount_cents":4999}`, no, 401, CodeUnauthorized, StatusPaid, 1},

		{"unknown route", "", "GET", "/v1/nope", "", k, 404, CodeNotFound, "", 0},
		{"wrong method", StatusPending, "DELETE", "/v1/payments/{txn}", "", k, 405, CodeMethodNotAllowed, StatusPending, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			s := newSim(t, Options{Clock: clock.Now})
			m := newMerchant(t, clock.Now, nil)
			txn, order := setup(t, s, m, tc.state)
			r := strings.NewReplacer("{txn}", txn, "{order}", order.String(), "{url}", m.url())
			var before Payment
			if tc.state != "" {
				before, _ = s.client.Get(context.Background(), txn)
			}
			status, body := s.call(t, tc.method, r.Replace(tc.path), r.Replace(tc.body), tc.key)
			if status != tc.status {
				t.Fatalf("status %d, want %d (body %v)", status, tc.status, body)
			}
			if tc.code != "" {
				if body["code"] != tc.code {
					t.Errorf("code %v, want %s", body["code"], tc.code)
				}
			} else {
				if body["status"] != string(tc.after) {
					t.Errorf("status field %v, want %s", body["status"], tc.after)
				}
				if body["merchant_order_id"] != order.String() || body["amount_cents"] != 4999.0 {
					t.Errorf("payment %v", body)
				}
				if txnGot, _ := body["transaction_id"].(string); !strings.HasPrefix(txnGot, "txn_") ||
					(tc.state != "" && txnGot != txn) || body["pay_url"] != "/v1/payments/"+txnGot+"/pay" {
					t.Errorf("transaction %v, pay_url %v", body["transaction_id"], body["pay_url"])
				}
			}
			if tc.state != "" {
				after, err := s.client.Get(context.Background(), txn)
				if err != nil {
					t.Fatal(err)
				}
				if after.Status != tc.after {
					t.Errorf("stored status %s, want %s", after.Status, tc.after)
				}
				if tc.code != "" && (after.Status != before.Status) {
					t.Errorf("an error answer changed the payment: %s → %s", before.Status, after.Status)
				}
				if tc.code == CodeAlreadyPaid || tc.code == CodeAmountMismatch || tc.code == CodeAlreadyRefunded {
					p, _ := body["payment"].(map[string]any)
					if p == nil || p["status"] != string(before.Status) {
						t.Errorf("409 carries payment %v, want status %s", body["payment"], before.Status)
					}
				}
			}
			if got := s.srv.Stats().Callbacks.Events; got != tc.events {
				t.Errorf("events %d, want %d", got, tc.events)
			}
		})
	}
}

func TestTimestampsAndRefundRecord(t *testing.T) {
	clock := newFakeClock()
	s := newSim(t, Options{Clock: clock.Now})
	m := newMerchant(t, clock.Now, nil)
	ctx := context.Background()
	p, err := s.client.Create(ctx, uuid.New(), 100, "CNY", m.url())
	if err != nil {
		t.Fatal(err)
	}
	if !p.CreatedAt.Equal(clock.Now()) || p.PaidAt != nil || p.ClosedAt != nil || p.RefundedAt != nil {
		t.Fatalf("created %+v", p)
	}
	clock.Advance(time.Second)
	p, _ = s.client.Pay(ctx, p.TransactionID, PayOptions{})
	if p.PaidAt == nil || !p.PaidAt.Equal(clock.Now()) {
		t.Fatalf("paid_at %v, want %v", p.PaidAt, clock.Now())
	}
	clock.Advance(time.Second)
	p, _ = s.client.Refund(ctx, p.TransactionID, "refund-7", 100)
	if p.RefundedAt == nil || !p.RefundedAt.Equal(clock.Now()) || p.RefundID != "refund-7" || p.RefundAmountCents != 100 {
		t.Fatalf("refunded %+v", p)
	}
	q, _ := s.client.Create(ctx, uuid.New(), 100, "CNY", m.url())
	clock.Advance(time.Second)
	q, _ = s.client.Close(ctx, q.TransactionID)
	if q.ClosedAt == nil || !q.ClosedAt.Equal(clock.Now()) {
		t.Fatalf("closed %+v", q)
	}
}

func TestStatsEndpoint(t *testing.T) {
	s := newSim(t, Options{})
	m := newMerchant(t, time.Now, nil)
	for _, st := range []Status{StatusPending, StatusPending, StatusPaid, StatusClosed, StatusRefunded} {
		setup(t, s, m, st)
	}
	eventually(t, "callbacks acked", func() bool { return s.srv.Stats().Callbacks.Acked == 2 })
	status, body := s.call(t, "GET", "/v1/stats", "", "")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	want := map[string]float64{"PENDING": 2, "PAID": 1, "CLOSED": 1, "REFUNDED": 1}
	got, _ := body["payments"].(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("payments[%s] = %v, want %v", k, got[k], v)
		}
	}
	cb, _ := body["callbacks"].(map[string]any)
	for k, v := range map[string]float64{"events": 2, "deliveries": 2, "sent": 2, "acked": 2, "failed": 0, "given_up": 0, "in_flight": 0} {
		if cb[k] != v {
			t.Errorf("callbacks[%s] = %v, want %v", k, cb[k], v)
		}
	}
}

func TestFailNext(t *testing.T) {
	s := newSim(t, Options{})
	m := newMerchant(t, time.Now, nil)
	ctx := context.Background()

	t.Run("before: nothing happens", func(t *testing.T) {
		txn, _ := setup(t, s, m, StatusPending)
		if err := s.client.FailNext(ctx, "close", 2, false); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			_, err := s.client.Close(ctx, txn)
			if !IsRetryable(err) || !strings.Contains(fmt.Sprint(err), "503") {
				t.Fatalf("close %d: %v, want a retryable 503", i, err)
			}
			if p, _ := s.client.Get(ctx, txn); p.Status != StatusPending {
				t.Fatalf("injected failure changed the payment to %s", p.Status)
			}
		}
		if p, err := s.client.Close(ctx, txn); err != nil || p.Status != StatusClosed {
			t.Fatalf("third close: %v %v", p.Status, err)
		}
	})
	t.Run("after: the work is done, the answer is lost", func(t *testing.T) {
		txn, _ := setup(t, s, m, StatusPending)
		if err := s.client.FailNext(ctx, "pay", 1, true); err != nil {
			t.Fatal(err)
		}
		if _, err := s.client.Pay(ctx, txn, PayOptions{}); !IsRetryable(err) {
			t.Fatalf("pay: %v, want retryable", err)
		}
		if p, _ := s.client.Get(ctx, txn); p.Status != StatusPaid {
			t.Fatalf("status %s, want PAID", p.Status)
		}
		m.next(t) // the callback still goes out
	})
	t.Run("cleared with times 0", func(t *testing.T) {
		_ = s.client.FailNext(ctx, "get", 5, false)
		_ = s.client.FailNext(ctx, "get", 0, false)
		if _, err := s.client.Get(ctx, "txn_x"); !errorsIsNotFound(err) {
			t.Fatalf("get: %v, want not found", err)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		for _, body := range []string{`{"endpoint":"nope","times":1}`, `{"endpoint":"close","times":-1}`, `{"endpoint":"close","times":1,"x":1}`} {
			if status, b := s.call(t, "POST", "/v1/control/fail-next", body, testKey); status != http.StatusBadRequest || b["code"] != CodeBadRequest {
				t.Errorf("%s: %d %v", body, status, b)
			}
		}
		if status, _ := s.call(t, "POST", "/v1/control/fail-next", `{"endpoint":"close","times":1}`, ""); status != http.StatusUnauthorized {
			t.Errorf("no key: %d", status)
		}
	})
}
