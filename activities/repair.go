package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/state"
)

// Repair actions an operator may signal (docs/operations.md). Each runs only
// standard transitions and only from the states listed with it.
const (
	// RepairRetryCompensation: reservation MANUAL_REVIEW with its compensation
	// task MANUAL → task RETRY, reservation ORDER_REJECTED; the saga runs the
	// standard compensation again (the Redis marker keeps it at most once).
	RepairRetryCompensation = "retry-compensation"
	// RepairMarkResolved: reservation MANUAL_REVIEW; the operator attests the
	// case was settled outside the system. Business rows are not changed.
	RepairMarkResolved = "mark-resolved"
	// RepairForceCancelUnpaid: reservation ORDER_CREATED, order CREATED or
	// PAYING (the buyer will not pay) → the saga runs the standard cancel
	// (CANCEL_PENDING, provider close, CANCELLED only without a payment).
	RepairForceCancelUnpaid = "force-cancel-unpaid"
	// RepairRebuildProjection: reservation ORDER_CREATED → the saga re-runs
	// the idempotent Redis projection (order_created.lua).
	RepairRebuildProjection = "rebuild-projection"
)

// repairTarget is the state each action aims for (repair_task.target_state).
var repairTarget = map[string]string{
	RepairRetryCompensation: "COMPENSATED",
	RepairMarkResolved:      "RESOLVED_MANUALLY",
	RepairForceCancelUnpaid: "CANCELLED",
	RepairRebuildProjection: "ORDER_CREATED",
}

// RepairActions lists the actions the repair signal accepts.
var RepairActions = []string{RepairRetryCompensation, RepairMarkResolved, RepairForceCancelUnpaid, RepairRebuildProjection}

// RepairRequest is the payload of the saga's repair signal.
type RepairRequest struct {
	Action   string `json:"action"`
	RepairID string `json:"repair_id"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// ReservationID is filled in by the saga, never by the operator.
	ReservationID uuid.UUID `json:"reservation_id"`
}

// RepairResult is the recorded outcome of a repair.
type RepairResult struct {
	RepairID string
	Action   string
	Accepted bool
	Reason   string
	Before   string
	After    string
	// Duplicate: this repair_id was recorded before; nothing was done now.
	Duplicate bool
}

func (r RepairRequest) validate() string {
	switch {
	case !slices.Contains(RepairActions, r.Action):
		return fmt.Sprintf("unknown action %q (want one of %s)", r.Action, strings.Join(RepairActions, ", "))
	case strings.TrimSpace(r.RepairID) == "" || len(r.RepairID) > 128:
		return "repair_id is required (1-128 characters) and must be new for each distinct repair"
	case strings.TrimSpace(r.Operator) == "" || len(r.Operator) > 128:
		return "operator is required (who is doing this)"
	case strings.TrimSpace(r.Reason) == "" || len(r.Reason) > 2000:
		return "reason is required (why, with the evidence or incident id)"
	}
	return ""
}

// ApplyRepair validates a repair against PostgreSQL, records it in
// repair_task (audit: before/after, operator, reason, time) and executes its
// standard transition, all in one transaction. The same repair_id again
// returns the recorded result and changes nothing.
//
// A repair_id that is empty or too long is refused without being recorded
// (it cannot key the audit row); every other input is validated before the
// database and a refusal is recorded with the offending value cut to fit.
func (a *Activities) ApplyRepair(ctx context.Context, req RepairRequest) (RepairResult, error) {
	if strings.TrimSpace(req.RepairID) == "" || len(req.RepairID) > 128 {
		a.log.Warn("repair.refused_unrecorded", "reservation_id", req.ReservationID, "repair_id_length", len(req.RepairID))
		return RepairResult{RepairID: req.RepairID, Action: clip(req.Action, 64),
			Reason: "repair_id is required (1-128 characters) and must be new for each distinct repair: not recorded"}, nil
	}
	var out RepairResult
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var err error
		out, err = a.applyRepair(ctx, tx, req)
		return err
	})
	if err != nil {
		return RepairResult{}, err
	}
	if err := a.fp.Check(failpoint.AfterRepairCommit); err != nil {
		return RepairResult{}, err // committed, but the answer is lost: the retry gets the recorded decision
	}
	a.log.Info("repair.recorded", "reservation_id", req.ReservationID, "repair_id", req.RepairID, "action", req.Action,
		"operator", req.Operator, "accepted", out.Accepted, "reason", out.Reason)
	return out, nil
}

func (a *Activities) applyRepair(ctx context.Context, tx pgx.Tx, req RepairRequest) (RepairResult, error) {
	out := RepairResult{RepairID: req.RepairID, Action: clip(req.Action, 64)}
	if prior, ok, err := recordedRepair(ctx, tx, req.RepairID, req.ReservationID); err != nil || ok {
		return prior, err
	}
	var resStatus state.Reservation
	var taskStatus state.Compensation
	var orderStatus state.Order
	err := tx.QueryRow(ctx, `
		SELECT r.status, COALESCE(t.status, ''), COALESCE(o.status, '')
		FROM inventory_reservation r LEFT JOIN compensation_task t ON t.reservation_id = r.reservation_id
		LEFT JOIN orders o ON o.order_id = r.order_id
		WHERE r.reservation_id = $1 FOR UPDATE OF r`, req.ReservationID).Scan(&resStatus, &taskStatus, &orderStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		resStatus = "ABSENT"
	} else if err != nil {
		return out, fmt.Errorf("read state for repair: %w", err)
	}
	out.Before = stateText(resStatus, taskStatus)
	if orderStatus != "" {
		out.Before += " order=" + string(orderStatus)
	}
	refuse := req.validate()
	if refuse == "" {
		switch req.Action {
		case RepairRetryCompensation, RepairMarkResolved:
			if resStatus != state.ReservationManualReview {
				refuse = fmt.Sprintf("reservation is %s, %s applies only in MANUAL_REVIEW", resStatus, req.Action)
			} else if req.Action == RepairRetryCompensation && taskStatus != state.CompensationManual {
				refuse = fmt.Sprintf("compensation task is %q, retry-compensation needs MANUAL", taskStatus)
			}
		case RepairForceCancelUnpaid:
			if resStatus != state.ReservationOrderCreated || (orderStatus != state.OrderCreated && orderStatus != state.OrderPaying) {
				refuse = fmt.Sprintf("reservation %s with order %q: force-cancel-unpaid needs an ORDER_CREATED reservation whose order is CREATED or PAYING", resStatus, orderStatus)
			}
		case RepairRebuildProjection:
			if resStatus != state.ReservationOrderCreated {
				refuse = fmt.Sprintf("reservation is %s, rebuild-projection needs ORDER_CREATED", resStatus)
			}
		}
	}
	out.After = out.Before
	if refuse == "" {
		if req.Action == RepairRetryCompensation {
			if _, err := tx.Exec(ctx, `UPDATE compensation_task SET status = 'RETRY', lease_owner = NULL, lease_until = NULL,
				next_retry_at = clock_timestamp(), updated_at = clock_timestamp() WHERE reservation_id = $1 AND status = 'MANUAL'`,
				req.ReservationID); err != nil {
				return out, fmt.Errorf("task → RETRY: %w", err)
			}
			if _, err := tx.Exec(ctx, `UPDATE inventory_reservation SET status = 'ORDER_REJECTED', version = version + 1,
				updated_at = clock_timestamp() WHERE reservation_id = $1 AND status = 'MANUAL_REVIEW'`, req.ReservationID); err != nil {
				return out, fmt.Errorf("reservation → ORDER_REJECTED: %w", err)
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
	evidence, _ := json.Marshal(map[string]string{"before": out.Before})
	before, _ := json.Marshal(map[string]string{"state": out.Before})
	after, _ := json.Marshal(map[string]string{"state": out.After})
	if _, err := tx.Exec(ctx, `
		INSERT INTO repair_task (repair_id, object_type, object_id, rule_name, target_state, status, operator, reason,
		                         evidence, before_state, after_state, result)
		VALUES ($1, 'RESERVATION', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		req.RepairID, req.ReservationID.String(), "MANUAL:"+clip(req.Action, 57), nonEmpty(repairTarget[req.Action], "UNKNOWN"), status,
		nonEmpty(clip(req.Operator, 128), "unknown"), nonEmpty(clip(req.Reason, 2000), "-"), evidence, before, after, nonEmpty(refuse, "ok")); err != nil {
		return out, fmt.Errorf("record repair %s: %w", req.RepairID, err)
	}
	return out, nil
}

// recordedRepair returns the decision recorded for repairID, if any. A
// repair_id recorded for another reservation is refused (ok, not a duplicate):
// its decision was taken for something else.
func recordedRepair(ctx context.Context, tx pgx.Tx, repairID string, rid uuid.UUID) (RepairResult, bool, error) {
	var r RepairResult
	var status state.Repair
	var result, object string
	var before, after []byte
	err := tx.QueryRow(ctx, `SELECT rule_name, status, result, before_state, after_state, object_id FROM repair_task WHERE repair_id = $1`,
		repairID).Scan(&r.Action, &status, &result, &before, &after, &object)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read repair %s: %w", repairID, err)
	}
	r.RepairID = repairID
	r.Action = strings.TrimPrefix(r.Action, "MANUAL:")
	if object != rid.String() {
		r.Action, r.Reason = "", "repair_id already used for "+object+": choose a new repair_id (nothing changed)"
		return r, true, nil
	}
	r.Accepted, r.Duplicate = status == state.RepairApplied, true
	if !r.Accepted {
		r.Reason = result
	}
	var b, a map[string]string
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	r.Before, r.After = b["state"], a["state"]
	r.Reason = strings.TrimSpace(r.Reason + " (repair_id already used: recorded result returned, nothing changed)")
	return r, true, nil
}

func stateText(reservation state.Reservation, task state.Compensation) string {
	if task == "" {
		return "reservation=" + string(reservation)
	}
	return "reservation=" + string(reservation) + " compensation_task=" + string(task)
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
