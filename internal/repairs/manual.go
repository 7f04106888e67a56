package repairs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// target is the state each action aims for (repair_task.target_state).
var target = map[string]string{
	steps.RepairRetryCompensation: "COMPENSATED",
	steps.RepairMarkResolved:      "RESOLVED_MANUALLY",
	steps.RepairForceCancelUnpaid: "CANCELLED",
	steps.RepairRebuildProjection: "ORDER_CREATED",
}

func validate(r steps.RepairRequest) string {
	switch {
	case !slices.Contains(steps.RepairActions, r.Action):
		return fmt.Sprintf("unknown action %q (want one of %s)", r.Action, strings.Join(steps.RepairActions, ", "))
	case !IDUsable(r.RepairID):
		return "repair_id is required (1-128 characters) and must be new for each distinct repair"
	case strings.TrimSpace(r.Operator) == "" || len(r.Operator) > 128:
		return "operator is required (who is doing this)"
	case strings.TrimSpace(r.Reason) == "" || len(r.Reason) > 2000:
		return "reason is required (why, with the evidence or incident id)"
	}
	return ""
}

// Apply validates a repair against PostgreSQL, records it in repair_task
// (audit: before/after, operator, reason, time) and executes its standard
// transition, all in tx. The same repair_id again returns the recorded
// result and changes nothing. A repair_id that belongs to another
// reservation is refused.
//
// The caller refuses, without recording, a repair_id that is empty or too
// long (it cannot key the audit row; see IDUsable); every other input is
// validated here and a refusal is recorded with the offending value cut to fit.
func Apply(ctx context.Context, tx pgx.Tx, req steps.RepairRequest) (steps.RepairResult, error) {
	out := steps.RepairResult{RepairID: req.RepairID, Action: clip(req.Action, 64)}
	if prior, ok, err := recordedManual(ctx, tx, req.RepairID, req.ReservationID); err != nil || ok {
		return prior, err
	}
	resStatus, taskStatus, orderStatus, err := lockSubject(ctx, tx, req.ReservationID)
	if err != nil {
		return out, err
	}
	out.Before = stateText(resStatus, taskStatus)
	if !orderStatus.IsZero() {
		out.Before += " order=" + orderStatus.String()
	}
	refuse := validate(req)
	if refuse == "" {
		refuse = refusal(req.Action, resStatus, taskStatus, orderStatus)
	}
	out.After = out.Before
	if refuse == "" {
		if req.Action == steps.RepairRetryCompensation {
			if err := inventory.RetryCompensation(ctx, tx, req.ReservationID); err != nil {
				return out, err
			}
			out.After = stateText(state.ReservationOrderRejected, state.CompensationRetry)
		}
		out.Accepted = true
	}
	out.Reason = refuse
	status := state.RepairApplied
	if !out.Accepted {
		status = state.RepairRefused
	}
	return out, Insert(ctx, tx, Entry{RepairID: req.RepairID, ObjectType: "RESERVATION", ObjectID: req.ReservationID.String(),
		Rule: "MANUAL:" + clip(req.Action, 57), Target: nonEmpty(target[req.Action], "UNKNOWN"), Status: status,
		Operator: nonEmpty(clip(req.Operator, 128), "unknown"), Reason: nonEmpty(clip(req.Reason, 2000), "-"),
		Evidence: map[string]any{"before": out.Before}, Before: out.Before, After: out.After, Result: nonEmpty(refuse, "ok")})
}

// lockSubject locks the reservation and reads its task's and order's status
// (the zero status, read as ABSENT, when PostgreSQL has no reservation or
// none of the others).
func lockSubject(ctx context.Context, tx pgx.Tx, rid uuid.UUID) (state.Reservation, state.Compensation, state.Order, error) {
	var resStatus state.Reservation
	var taskStatus state.Compensation
	var orderStatus state.Order
	err := tx.QueryRow(ctx, `
		SELECT r.status, t.status, o.status
		FROM inventory_reservation r LEFT JOIN compensation_task t ON t.reservation_id = r.reservation_id
		LEFT JOIN orders o ON o.order_id = r.order_id
		WHERE r.reservation_id = $1 FOR UPDATE OF r`, rid).Scan(&resStatus, &taskStatus, &orderStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Reservation{}, state.Compensation{}, state.Order{}, nil
	}
	if err != nil {
		return state.Reservation{}, state.Compensation{}, state.Order{}, fmt.Errorf("read state for repair: %w", err)
	}
	return resStatus, taskStatus, orderStatus, nil
}

// refusal says why action cannot run from these states ("" when it can).
func refusal(action string, resStatus state.Reservation, taskStatus state.Compensation, orderStatus state.Order) string {
	switch action {
	case steps.RepairRetryCompensation, steps.RepairMarkResolved:
		if resStatus != state.ReservationManualReview {
			return fmt.Sprintf("reservation is %s, %s applies only in MANUAL_REVIEW", reservationText(resStatus), action)
		}
		if action == steps.RepairRetryCompensation && taskStatus != state.CompensationManual {
			return fmt.Sprintf("compensation task is %q, retry-compensation needs MANUAL", taskStatus)
		}
	case steps.RepairForceCancelUnpaid:
		if resStatus != state.ReservationOrderCreated || (orderStatus != state.OrderCreated && orderStatus != state.OrderPaying) {
			return fmt.Sprintf("reservation %s with order %q: force-cancel-unpaid needs an ORDER_CREATED reservation whose order is CREATED or PAYING", reservationText(resStatus), orderStatus)
		}
	case steps.RepairRebuildProjection:
		if resStatus != state.ReservationOrderCreated {
			return fmt.Sprintf("reservation is %s, rebuild-projection needs ORDER_CREATED", reservationText(resStatus))
		}
	}
	return ""
}

// recordedManual returns the decision recorded for repairID, if any. A
// repair_id recorded for another reservation is refused (ok, not a duplicate):
// its decision was taken for something else.
func recordedManual(ctx context.Context, tx pgx.Tx, repairID string, rid uuid.UUID) (steps.RepairResult, bool, error) {
	rec, ok, err := Lookup(ctx, tx, repairID)
	if err != nil || !ok {
		return steps.RepairResult{}, false, err
	}
	r := steps.RepairResult{RepairID: repairID, Action: strings.TrimPrefix(rec.Rule, "MANUAL:")}
	if rec.ObjectID != rid.String() {
		r.Action, r.Reason = "", "repair_id already used for "+rec.ObjectID+": choose a new repair_id (nothing changed)"
		return r, true, nil
	}
	r.Accepted, r.Duplicate = rec.Status == state.RepairApplied, true
	if !r.Accepted {
		r.Reason = rec.Result
	}
	r.Before, r.After = rec.Before, rec.After
	r.Reason = strings.TrimSpace(r.Reason + " (repair_id already used: recorded result returned, nothing changed)")
	return r, true, nil
}

// IDUsable reports whether a repair_id can key an audit row (1-128 characters, not blank).
func IDUsable(id string) bool { return strings.TrimSpace(id) != "" && len(id) <= 128 }

func stateText(reservation state.Reservation, task state.Compensation) string {
	if task.IsZero() {
		return "reservation=" + reservationText(reservation)
	}
	return "reservation=" + reservationText(reservation) + " compensation_task=" + task.String()
}

// reservationText is r's text, ABSENT for none (PostgreSQL has no row).
func reservationText(r state.Reservation) string {
	if r.IsZero() {
		return "ABSENT"
	}
	return r.String()
}

// clip cuts s to at most n bytes (a refused value recorded for audit must fit its column).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func nonEmpty(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// Check says, without changing anything, whether action would be accepted
// for the reservation now ("" when it would; else the reason it would be
// refused), from the same rules Apply uses.
func Check(ctx context.Context, tx pgx.Tx, rid uuid.UUID, action string) (string, error) {
	if !slices.Contains(steps.RepairActions, action) {
		return fmt.Sprintf("unknown action %q (want one of %s)", action, strings.Join(steps.RepairActions, ", ")), nil
	}
	resStatus, taskStatus, orderStatus, err := lockSubject(ctx, tx, rid)
	if err != nil {
		return "", err
	}
	return refusal(action, resStatus, taskStatus, orderStatus), nil
}
