package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// RepairOutcome is what became of one repair sent by Repair.
type RepairOutcome struct {
	RepairID string
	// Status is the repair_task row's status (APPLIED, REFUSED), empty when
	// the saga did not record it within the wait.
	Status state.Repair
	Result string
	Before string
	// Reservation is the reservation's status when Repair returned.
	Reservation state.Reservation
	// Duplicate: the repair_id was recorded before; nothing was sent.
	Duplicate bool
}

// repairPoll is how often Repair looks for the saga's record of the repair.
const repairPoll = 200 * time.Millisecond

// Repair carries out one operator repair of a reservation through its saga,
// whatever the saga does: checked against PostgreSQL first (a repair that
// does not fit the reservation's state is refused with the reason and
// nothing is sent), then sent as the saga's repair signal; a saga that does
// not run (terminated, failed, completed, never started) is started again
// from PostgreSQL with the repair as its first signal (workflows.RepairSaga).
// It waits up to wait for the saga's record of the repair (repair_task).
func Repair(ctx context.Context, conns *Conns, taskQueue string, req steps.RepairRequest, wait time.Duration) (RepairOutcome, error) {
	out := RepairOutcome{RepairID: req.RepairID}
	if err := validateRepair(req); err != nil {
		return out, err
	}
	if conns.Temporal == nil {
		return out, errors.New("repair: needs Temporal")
	}
	if prior, ok, err := repairs.Lookup(ctx, conns.Pool, req.RepairID); err != nil {
		return out, err
	} else if ok { // recorded before: its decision stands, nothing is sent again
		if prior.ObjectID != req.ReservationID.String() {
			return out, fmt.Errorf("--repair-id %s is already used for %s: choose a new one (nothing sent)", req.RepairID, prior.ObjectID)
		}
		out.Status, out.Result, out.Before, out.Duplicate = prior.Status, prior.Result, prior.Before, true
		return out, readReservation(ctx, conns, &out, req.ReservationID)
	}
	var refuse string
	if err := pgx.BeginFunc(ctx, conns.Pool, func(tx pgx.Tx) error {
		var err error
		refuse, err = repairs.Check(ctx, tx, req.ReservationID, req.Action)
		return err
	}); err != nil {
		return out, fmt.Errorf("repair: check against PostgreSQL: %w", err)
	}
	if refuse != "" {
		return out, fmt.Errorf("repair refused, nothing sent: %s", refuse)
	}
	m, err := inventory.Message(ctx, conns.Pool, req.ReservationID)
	if err != nil {
		return out, err
	}
	if err := workflows.RepairSaga(ctx, conns.Temporal, taskQueue, m, req); err != nil {
		return out, err
	}
	rec, ok, err := awaitRecord(ctx, conns, req.RepairID, wait)
	if err != nil {
		return out, err
	}
	if ok {
		out.Status, out.Result, out.Before = rec.Status, rec.Result, rec.Before
	}
	return out, readReservation(ctx, conns, &out, req.ReservationID)
}

// awaitRecord waits up to wait for repair_task to hold repairID.
func awaitRecord(ctx context.Context, conns *Conns, repairID string, wait time.Duration) (repairs.Recorded, bool, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(repairPoll)
	defer tick.Stop()
	for {
		rec, ok, err := repairs.Lookup(ctx, conns.Pool, repairID)
		if err != nil || ok {
			return rec, ok, err
		}
		select {
		case <-ctx.Done():
			return rec, false, ctx.Err()
		case <-deadline.C:
			return rec, false, nil
		case <-tick.C:
		}
	}
}

func readReservation(ctx context.Context, conns *Conns, out *RepairOutcome, rid uuid.UUID) error {
	return conns.Pool.QueryRow(ctx, `SELECT status FROM inventory_reservation WHERE reservation_id = $1`, rid).Scan(&out.Reservation)
}

func validateRepair(req steps.RepairRequest) error {
	switch {
	case req.ReservationID == uuid.Nil:
		return errors.New("repair: the reservation id is required")
	case !slices.Contains(steps.RepairActions, req.Action):
		return fmt.Errorf("--action %q: want one of %s", req.Action, strings.Join(steps.RepairActions, ", "))
	case !repairs.IDUsable(req.RepairID):
		return errors.New("--repair-id is required (1-128 characters), one per decision, e.g. INC-42-<reservation_id>")
	case strings.TrimSpace(req.Operator) == "" || len(req.Operator) > 128:
		return errors.New("--operator is required (1-128 characters): who is doing this")
	case strings.TrimSpace(req.Reason) == "" || len(req.Reason) > 2000:
		return errors.New("--reason is required (1-2000 characters): why, with the evidence or incident id")
	}
	return nil
}
