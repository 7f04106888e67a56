package payments

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

func TestPaymentID(t *testing.T) {
	a := PaymentID("paysim", "txn_1")
	if a != PaymentID("paysim", "txn_1") {
		t.Fatal("PaymentID is not deterministic")
	}
	for _, other := range []uuid.UUID{PaymentID("paysim", "txn_2"), PaymentID("other", "txn_1"), PaymentID("paysimtxn_1", ""), PaymentID("", "paysimtxn_1")} {
		if other == a {
			t.Errorf("PaymentID collides: %s", other)
		}
	}
	if want := ids.Named("PAYMENT", uuid.Nil, "paysim", "txn_1"); a != want {
		t.Errorf("PaymentID = %s, want %s", a, want)
	}
}

func TestRefundID(t *testing.T) {
	p, q := uuid.New(), uuid.New()
	got := RefundID(p)
	if got != RefundID(p) || got == RefundID(q) {
		t.Fatal("RefundID must be fixed per payment and differ between payments")
	}
	if want := "refund_" + ids.Named("REFUND", p).String(); got != want {
		t.Errorf("RefundID = %q, want %q", got, want)
	}
}

func TestEvidence(t *testing.T) {
	order, at := uuid.New(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := ProviderPayment{TransactionID: "txn_9", OrderID: order, AmountCents: 123, Status: ProviderPaid, PaidAt: at}
	want := steps.Evidence{OrderID: order, Provider: "paysim", TransactionID: "txn_9", AmountCents: 123, PaidAt: at}
	if got := p.Evidence("paysim"); got != want {
		t.Errorf("Evidence = %+v, want %+v", got, want)
	}
	e := &AlreadyPaidError{Payment: p}
	if msg := e.Error(); !strings.Contains(msg, "txn_9") || !strings.Contains(msg, order.String()) {
		t.Errorf("AlreadyPaidError = %q: names neither the transaction nor the order", msg)
	}
}

func TestCancelAnswer(t *testing.T) {
	tests := []struct {
		status   state.Order
		starting bool
		want     state.Cancel
	}{
		{state.OrderCreated, true, state.CancelPaymentStarting},
		{state.OrderPaying, true, state.CancelPaymentStarting},
		{state.OrderCreated, false, state.CancelFound(state.OrderCreated)},
		{state.OrderPaying, false, state.CancelFound(state.OrderPaying)},
		{state.OrderPaid, true, state.CancelFound(state.OrderPaid)},
		{state.OrderCancelPending, true, state.CancelFound(state.OrderCancelPending)},
		{state.OrderCancelled, true, state.CancelFound(state.OrderCancelled)},
		{state.OrderRefunded, false, state.CancelFound(state.OrderRefunded)},
	}
	for _, tt := range tests {
		if got := cancelAnswer(tt.status, tt.starting); got != tt.want {
			t.Errorf("cancelAnswer(%s, starting=%v) = %q, want %q", tt.status, tt.starting, got, tt.want)
		}
	}
}

func TestPaymentRefusal(t *testing.T) {
	tests := []struct {
		status  state.Order
		expired bool
		want    string
		refused bool
	}{
		{state.OrderCreated, false, "CREATED", false},
		{state.OrderPaying, false, "PAYING", false},
		{state.OrderCreated, true, "EXPIRED", true},
		{state.OrderPaying, true, "EXPIRED", true},
		{state.OrderPaid, false, "PAID", true},
		{state.OrderPaid, true, "PAID", true},
		{state.OrderCancelPending, false, "CANCEL_PENDING", true},
		{state.OrderCancelled, true, "CANCELLED", true},
		{state.OrderRefunding, false, "REFUNDING", true},
	}
	for _, tt := range tests {
		got, refused := paymentRefusal(tt.status, tt.expired)
		if got != tt.want || refused != tt.refused {
			t.Errorf("paymentRefusal(%s, expired=%v) = %q, %v; want %q, %v", tt.status, tt.expired, got, refused, tt.want, tt.refused)
		}
	}
}

func TestStartedIntent(t *testing.T) {
	for status, want := range map[state.Order]state.Intent{state.OrderPaying: state.IntentOpen, state.OrderCreated: state.IntentClosed,
		state.OrderCancelPending: state.IntentClosed, state.OrderPaid: state.IntentClosed, state.OrderCancelled: state.IntentClosed,
		{}: state.IntentClosed} {
		if got := startedIntent(status); got != want {
			t.Errorf("startedIntent(%q) = %q, want %q", status, got, want)
		}
		if got := startedIntent(status); got != state.IntentOpen && got != state.IntentClosed {
			t.Errorf("startedIntent(%q) = %q: not a payment_intent status", status, got)
		}
	}
}

func TestSettleIntentRefusesOtherStatuses(t *testing.T) {
	// Refused before any I/O (the store has no pool).
	s := NewStore(nil, nil)
	// "open" is no payment_intent status: ParseIntent refuses it, so it
	// cannot reach SettleIntent.
	if _, err := state.ParseIntent("open"); err == nil {
		t.Error(`ParseIntent("open") accepted a status no column holds`)
	}
	for _, status := range []state.Intent{state.IntentPaid, state.IntentCreating, {}} {
		if err := s.SettleIntent(context.Background(), uuid.New(), "txn", status); err == nil || !strings.Contains(err.Error(), "is not CLOSED or OPEN") {
			t.Errorf("SettleIntent(%q) = %v, want a refusal", status, err)
		}
	}
}

func TestNewStoreDefaultsFailpoints(t *testing.T) {
	if s := NewStore(nil, nil); s.fp == nil {
		t.Error("NewStore(nil fp) left the failpoints nil")
	}
}
