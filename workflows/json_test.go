package workflows

import (
	"encoding/json"
	"testing"

	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// TestBoundaryJSON pins the JSON of typed statuses crossing the Temporal
// boundary to what the recorded histories (testdata/) hold: a status is its
// text, none is "".
func TestBoundaryJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{SagaState{ReservationID: "r", Status: state.SagaPaid, Steps: []string{"paid"}},
			`{"ReservationID":"r","Status":"PAID","Steps":["paid"]}`},
		{steps.CompensateResult{Status: state.ReservationCompensated, LuaCode: 1, Reason: "COMPENSATED"},
			`{"Status":"COMPENSATED","LuaCode":1,"Reason":"COMPENSATED"}`},
		{steps.ReservationState{},
			`{"Status":"","Reason":"","OrderID":"00000000-0000-0000-0000-000000000000","OrderStatus":"","ExpiresAt":"0001-01-01T00:00:00Z"}`},
		{state.CancelPaymentStarting, `"PAYMENT_STARTING"`},
		{state.CancelFound(state.OrderCancelPending), `"CANCEL_PENDING"`},
		{state.OrderPaid, `"PAID"`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("json of %T = %s, %v; want %s", c.v, b, err, c.want)
		}
	}
	if state.SagaLate.String() != string(steps.OutcomeLate) {
		t.Errorf("SagaLate = %s, CreateOrder's late outcome = %s: a late saga must show the outcome", state.SagaLate, steps.OutcomeLate)
	}
}
