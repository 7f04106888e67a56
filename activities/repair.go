package activities

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state/steps"
)

// ApplyRepair validates, records and executes a repair in one transaction
// (repairs.Apply). The same repair_id again returns the recorded result. A
// repair_id that cannot key the audit row is refused without being recorded.
func (a *Activities) ApplyRepair(ctx context.Context, req steps.RepairRequest) (steps.RepairResult, error) {
	if !repairs.IDUsable(req.RepairID) {
		a.log.WarnContext(ctx, "repair.refused_unrecorded", "reservation_id", req.ReservationID, "repair_id_length", len(req.RepairID))
		return steps.RepairResult{RepairID: req.RepairID, Action: clip(req.Action, 64),
			Reason: "repair_id is required (1-128 characters) and must be new for each distinct repair: not recorded"}, nil
	}
	var out steps.RepairResult
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var err error
		out, err = repairs.Apply(ctx, tx, req)
		return err
	})
	if err != nil {
		return steps.RepairResult{}, err
	}
	if err := a.fp.Check(failpoint.AfterRepairCommit); err != nil {
		return steps.RepairResult{}, err // committed, but the answer is lost: the retry gets the recorded decision
	}
	a.log.InfoContext(ctx, "repair.recorded", "reservation_id", req.ReservationID, "repair_id", req.RepairID, "action", req.Action,
		"operator", req.Operator, "accepted", out.Accepted, "reason", out.Reason)
	return out, nil
}

// clip cuts s to at most n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
