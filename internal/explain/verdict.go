package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state"
)

// Verdict says whether the purchase is consistent and, if not, what to do.
type Verdict struct {
	Consistent bool      `json:"consistent"`
	Problems   []Problem `json:"problems,omitempty"`
	// Action is the repair that fits (a repair signal's action, or a command).
	Action string `json:"action,omitempty"`
	// Command is the exact command to run (placeholders in <angle brackets>).
	Command string `json:"command,omitempty"`
	// Note says what the purchase's state means when nothing is off.
	Note string `json:"note,omitempty"`
}

// Problem is one invariant that does not hold (the names of
// internal/invariants and docs/architecture.md).
type Problem struct {
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
	// Anomaly is reconciliation's name for it, when its rules found it
	// (internal/reconcile.Check): `seckill reconcile run` reports the same.
	Anomaly string `json:"anomaly,omitempty"`
}

// stuckAttempt is the attempt from which a pending activity counts as stuck
// (the default of SECKILL_ACTIVITY_ATTEMPTS_ALERT).
const stuckAttempt = 10

// openGrace is how long past its payment deadline an open order may wait
// for its saga's expiry timer before it counts as stuck.
const openGrace = 2 * time.Minute

// judge decides the verdict from the report.
func judge(rep Report, now time.Time, watermark time.Duration) Verdict {
	v := Verdict{}
	st := rep.Status
	add := func(inv, format string, a ...any) {
		v.Problems = append(v.Problems, Problem{Invariant: inv, Detail: fmt.Sprintf(format, a...)})
	}
	for _, rule := range rules {
		if action, cmd := rule(rep, now, add); action != "" && v.Action == "" {
			v.Action, v.Command = action, cmd
		}
	}
	found := reconcile.Check(facts(rep), now.Add(-watermark))
	if fd, ok := reconcile.CheckOpenOrder(st.Order, orderExpiry(rep), rep.Saga.Running(), now.Add(-watermark)); ok {
		found = append(found, fd)
	}
	for _, fd := range found {
		v.Problems = append(v.Problems, Problem{Invariant: anomalyInvariant[fd.Type], Anomaly: fd.Type, Detail: fd.Detail})
		if v.Action == "" {
			v.Action, v.Command = reconcileAction(rep, fd)
		}
	}
	if s := rep.Saga; s != nil {
		for _, p := range s.Pending {
			if p.Attempt >= stuckAttempt {
				add("I6", "activity %s is retrying (attempt %d): %s", p.Activity, p.Attempt, p.LastFailure)
			}
		}
	}
	v.Consistent = len(v.Problems) == 0
	if v.Consistent {
		v.Note = note(st, rep.Saga)
		if later := reconcile.Check(facts(rep), now); len(later) > 0 {
			v.Note += fmt.Sprintf("; changed less than reconciliation's watermark (%s) ago: reconciliation leaves it until then, "+
				"and would find %s if it stays so", watermark, later[0].Type)
		}
	}
	return v
}

// rules are the checks of one purchase; each may add problems and return
// the action and command that repair the first it finds.
var rules = []func(Report, time.Time, func(inv, format string, a ...any)) (action, command string){
	manualReview, openPastDeadline, unrefundedPayment,
}

// repairCommand is the operator repair through the reservation's saga:
// `seckill repair apply` signals a running saga and starts a closed (or
// never started) one again from PostgreSQL with the repair as its first
// signal, so it works whatever the saga does.
func repairCommand(rep Report, action string) string {
	return fmt.Sprintf(`seckill repair apply %s --action %s --repair-id <ticket>-%s --operator <you> --reason '<why, with the evidence>'`,
		rep.ReservationID, action, rep.ReservationID)
}

func reconcileRun(rep Report) string {
	return fmt.Sprintf("seckill reconcile run --activity %d", rep.ActivityID)
}

func manualReview(rep Report, _ time.Time, add func(string, string, ...any)) (string, string) {
	if rep.Status.Reservation != state.ReservationManualReview || rep.Status.Resolved {
		return "", ""
	}
	add("I4", "reservation is MANUAL_REVIEW (%s): automation stopped, a person decides", rep.Status.Reason)
	if rep.Status.Compensation == state.CompensationManual && rep.Status.Redis == state.ReservationReserved.String() {
		return "retry-compensation", repairCommand(rep, "retry-compensation")
	}
	return "mark-resolved", repairCommand(rep, "mark-resolved")
}

func openPastDeadline(rep Report, now time.Time, add func(string, string, ...any)) (string, string) {
	o := rep.Status.Order
	if o != state.OrderCreated && o != state.OrderPaying && o != state.OrderCancelPending || !rep.Status.OrderExpired {
		return "", ""
	}
	expires := orderExpiry(rep)
	if !expires.IsZero() && now.Sub(expires) < openGrace {
		return "", "" // the saga's expiry timer is about to fire
	}
	if rep.Saga.Running() {
		add("I6", "order %s is past its payment deadline and its saga is still waiting", o)
		return "force-cancel-unpaid", repairCommand(rep, "force-cancel-unpaid")
	}
	return "", "" // no saga runs: reconciliation's LOST_SAGA (reconcile.CheckOpenOrder, in judge)
}

func unrefundedPayment(rep Report, _ time.Time, add func(string, string, ...any)) (string, string) {
	o := rep.Status.Order
	kept := rep.Status.Payments[state.PaymentSuccess]
	if o == state.OrderPaid {
		kept-- // the payment that paid it stays
	}
	if kept <= 0 || rep.Status.RefundTasks[state.RefundDone] >= kept {
		return "", ""
	}
	if rep.Status.RefundTasks[state.RefundPending]+rep.Status.RefundTasks[state.RefundStarted] > 0 {
		add("I5", "%d payment(s) of a %s order owed back; the refund relay is on it", kept, o)
		return "wait for the refund relay, or start the refund", reconcileRun(rep)
	}
	add("I5", "%d payment(s) of a %s order owed back and no refund task records it", kept, o)
	return "reconcile (PAYMENT_ON_CANCELLED owes the refund)", reconcileRun(rep)
}

func orderExpiry(rep Report) time.Time {
	for _, e := range rep.Timeline {
		if e.Source == "orders" && e.Detail != nil {
			if s, ok := e.Detail["expires_at"].(string); ok {
				if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
					return t
				}
			}
		}
	}
	return time.Time{}
}

func redisDeadline(rep Report) time.Time {
	var ms int64
	if _, err := fmt.Sscan(rep.Redis.Hash["business_deadline_ms"], &ms); err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// note says what a consistent purchase's state means.
func note(st Statuses, saga *Saga) string {
	parts := []string{"reservation " + reservationText(st.Reservation)}
	if !st.Order.IsZero() {
		parts = append(parts, "order "+st.Order.String())
	}
	switch {
	case st.Order == state.OrderPaid:
		parts = append(parts, "paid: the unit is sold")
	case st.Order == state.OrderRefunded:
		parts = append(parts, "cancelled, the late payment refunded")
	case st.Order == state.OrderCancelled:
		parts = append(parts, "cancelled: the unit went back to stock")
	case st.Reservation == state.ReservationCompensated:
		parts = append(parts, "rejected ("+st.Reason+"): the unit went back to Redis")
	case st.Reservation == state.ReservationManualReview:
		parts = append(parts, "resolved by an operator (mark-resolved)")
	case st.Order == state.OrderCreated || st.Order == state.OrderPaying || st.Order == state.OrderCancelPending:
		parts = append(parts, "waiting for payment or expiry")
	case st.Reservation.IsZero():
		parts = append(parts, "admitted, its message on its way to the order service")
	}
	if saga != nil {
		parts = append(parts, "saga "+saga.Status)
	}
	return strings.Join(parts, "; ")
}
