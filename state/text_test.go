package state_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seckill/seckill/state"
)

// TestStatusJSONIsItsText: a status encodes as the JSON string its column
// holds (what recorded Temporal histories contain), the zero status as "",
// and decodes back; an unknown text is refused with its name.
func TestStatusJSONIsItsText(t *testing.T) {
	type payload struct {
		Reservation state.Reservation
		Order       state.Order
		None        state.Order
		Saga        state.Saga
		Cancel      state.Cancel
	}
	in := payload{Reservation: state.ReservationManualReview, Order: state.OrderPaid, Saga: state.SagaLate,
		Cancel: state.CancelPaymentStarting}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Reservation":"MANUAL_REVIEW","Order":"PAID","None":"","Saga":"LATE_AFTER_COMPENSATION","Cancel":"PAYMENT_STARTING"}`
	if string(b) != want {
		t.Fatalf("json = %s, want %s", b, want)
	}
	var out payload
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	var o state.Order
	err = json.Unmarshal([]byte(`"SHIPPED"`), &o)
	if err == nil || !strings.Contains(err.Error(), `unknown order status "SHIPPED"`) {
		t.Fatalf("decoding SHIPPED = %v, %v; want an unknown order status error", o, err)
	}
}

// TestParseAcceptsEveryStatusOfItsMachine: each type parses exactly the
// statuses its machine lists (the values its CHECK constraint allows).
func TestParseAcceptsEveryStatusOfItsMachine(t *testing.T) {
	for _, c := range columns() {
		for _, s := range c.states {
			if got, err := parseAny(c.name, s); err != nil || got != s {
				t.Errorf("%s: parse %q = %q, %v", c.name, s, got, err)
			}
		}
		if _, err := parseAny(c.name, "NOT_A_STATUS"); err == nil {
			t.Errorf("%s: parse accepted NOT_A_STATUS", c.name)
		}
		if _, err := parseAny(c.name, ""); err == nil {
			t.Errorf("%s: parse accepted the empty text", c.name)
		}
	}
}

func parseAny(machine, s string) (string, error) {
	str := func(v interface{ String() string }, err error) (string, error) { return v.String(), err }
	switch machine {
	case "ReservationMoves", "RedisReservationMoves":
		return str(state.ParseReservation(s))
	case "OrderMoves":
		return str(state.ParseOrder(s))
	case "PaymentMoves":
		return str(state.ParsePayment(s))
	case "IntentMoves":
		return str(state.ParseIntent(s))
	case "CompensationMoves":
		return str(state.ParseCompensation(s))
	case "OutboxMoves":
		return str(state.ParseOutbox(s))
	case "RefundMoves":
		return str(state.ParseRefund(s))
	case "RepairMoves":
		return str(state.ParseRepair(s))
	}
	panic(machine)
}

// TestScan: a column scans into its status, NULL into none; a text the
// column's CHECK would refuse is an error, not a status.
func TestScan(t *testing.T) {
	var o state.Order
	if err := o.Scan("CANCEL_PENDING"); err != nil || o != state.OrderCancelPending {
		t.Fatalf("Scan(CANCEL_PENDING) = %v, %v", o, err)
	}
	if err := o.Scan([]byte("PAID")); err != nil || o != state.OrderPaid {
		t.Fatalf("Scan([]byte PAID) = %v, %v", o, err)
	}
	if err := o.Scan(nil); err != nil || !o.IsZero() {
		t.Fatalf("Scan(nil) = %v, %v; want none", o, err)
	}
	if err := o.Scan("paid"); err == nil {
		t.Fatalf("Scan(paid) = %v, want an error", o)
	}
	if v, err := state.OrderPaid.Value(); err != nil || v != "PAID" {
		t.Fatalf("Value = %v, %v", v, err)
	}
	if v, err := (state.Order{}).Value(); err != nil || v != nil {
		t.Fatalf("Value of none = %v, %v; want NULL", v, err)
	}
}

// TestSagaStatuses: every reservation and order status is a saga status
// spelled the same, and the saga's own two parse.
func TestSagaStatuses(t *testing.T) {
	for _, r := range state.ReservationMoves.States {
		if g, err := state.ParseSaga(r.String()); err != nil || g != state.ReservationSaga(r) {
			t.Errorf("ParseSaga(%s) = %v, %v", r, g, err)
		}
	}
	for _, o := range state.OrderMoves.States {
		if g, err := state.ParseSaga(o.String()); err != nil || g != state.OrderSaga(o) {
			t.Errorf("ParseSaga(%s) = %v, %v", o, g, err)
		}
	}
	for _, g := range []state.Saga{state.SagaLate, state.SagaResolved} {
		if p, err := state.ParseSaga(g.String()); err != nil || p != g {
			t.Errorf("ParseSaga(%s) = %v, %v", g, p, err)
		}
	}
	if c := state.CancelFound(state.OrderPaid); c.Order() != state.OrderPaid || !state.CancelPaymentStarting.Order().IsZero() {
		t.Errorf("Cancel.Order disagrees: %v, %v", c.Order(), state.CancelPaymentStarting.Order())
	}
}
