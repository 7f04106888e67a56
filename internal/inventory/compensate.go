package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// ErrNotCompensable means PostgreSQL holds no rejection to compensate (the
// reservation is absent, or in a status no compensation may start from):
// a refusal no retry changes.
var ErrNotCompensable = errors.New("not compensable")

// ErrLeaseHeld means another attempt holds the compensation task's lease;
// the caller retries after it expires.
var ErrLeaseHeld = errors.New("compensation task lease held by another attempt")

// CompensationLease is how long one attempt owns the task: as
// long as the activity's start-to-close timeout (workflows.dbActivity), after
// which Temporal retries an attempt lost with its worker.
const CompensationLease = 10 * time.Second

// Compensate gives a rejected reservation's unit back to Redis exactly once
// (docs/spec.md#compensation): PostgreSQL CAS ORDER_REJECTED → COMPENSATING and a task
// claim by lease for owner, then compensate.lua with the fixed compensation
// id, then COMPENSATED + task APPLIED. A missing Redis reservation or any
// conflict never adds stock: task MANUAL, reservation MANUAL_REVIEW.
func (s *Store) Compensate(ctx context.Context, in steps.CompensateInput, owner string) (steps.CompensateResult, error) {
	r, err := s.authorizeCompensation(ctx, in.ReservationID)
	if err != nil {
		return steps.CompensateResult{}, err
	}
	if res, done, err := compensationStart(in.ReservationID, r.status); done || err != nil {
		return res, err
	}
	taskStatus, err := s.claimTask(ctx, in.ReservationID, owner)
	if errors.Is(err, ErrLeaseHeld) {
		s.m.Compensation.WithLabelValues("lease_held").Inc()
	}
	if err != nil {
		return steps.CompensateResult{}, err
	}
	if taskStatus == state.CompensationManual {
		return steps.CompensateResult{Status: state.ReservationManualReview, Reason: "COMPENSATION_TASK_MANUAL"}, nil
	}
	reply, err := s.compensateRedis(ctx, in, r)
	if err != nil {
		return steps.CompensateResult{}, err
	}
	code, text := int64(reply.Code), reply.Text
	if reply.Code.Applied() {
		if err := s.finishCompensation(ctx, in.ReservationID, owner, text); err != nil {
			return steps.CompensateResult{}, err
		}
		s.m.Compensation.WithLabelValues(compensationLabel(reply.Code)).Inc()
		s.log.InfoContext(ctx, "compensation.redis_applied", "reservation_id", in.ReservationID, "compensation_id", CompensationKey(in.ReservationID), "result", text)
		return steps.CompensateResult{Status: state.ReservationCompensated, LuaCode: code, Reason: text}, nil
	}
	if err := s.toManual(ctx, in.ReservationID, owner, text); err != nil {
		return steps.CompensateResult{}, err
	}
	s.m.Compensation.WithLabelValues(compensationLabel(reply.Code)).Inc()
	s.log.ErrorContext(ctx, "compensation.redis_missing", "reservation_id", in.ReservationID, "lua_code", code, "result", text)
	return steps.CompensateResult{Status: state.ReservationManualReview, LuaCode: code, Reason: text}, nil
}

// compensationLabel is seckill_compensation_total's result for
// compensate.lua's code: applied, already_applied, redis_missing, or
// state_conflict for any other refusal.
func compensationLabel(c lua.CompensateCode) string {
	switch c {
	case lua.Compensated:
		return "applied"
	case lua.AlreadyCompensated:
		return "already_applied"
	case lua.CompensateMissing:
		return "redis_missing"
	}
	return "state_conflict"
}

// compensationStart decides from the reservation's status after the
// authorization whether the compensation goes on (COMPENSATING), is already
// over (done: COMPENSATED or MANUAL_REVIEW, the result says which), or is
// not allowed (ErrNotCompensable).
func compensationStart(rid uuid.UUID, status state.Reservation) (res steps.CompensateResult, done bool, err error) {
	switch status {
	case state.ReservationCompensated, state.ReservationManualReview:
		return steps.CompensateResult{Status: status}, true, nil
	case state.ReservationCompensating:
		return steps.CompensateResult{}, false, nil
	}
	return steps.CompensateResult{}, false, fmt.Errorf("reservation %s is %s: %w: compensation not allowed", rid, status, ErrNotCompensable)
}

// compensateRedis runs compensate.lua with the fixed compensation id.
func (s *Store) compensateRedis(ctx context.Context, in steps.CompensateInput, r compensationSubject) (lua.CompensateReply, error) {
	k := lua.Keys{ActivityID: in.ActivityID, SKUID: in.SKUID, Bucket: in.Bucket}
	reply, err := lua.Compensate(ctx, s.rdb, k, lua.CompensateArgs{ReservationID: in.ReservationID.String(),
		CompensationID: CompensationKey(in.ReservationID), UserID: r.userID, NowMS: time.Now().UnixMilli(),
		TTL: s.terminalTTL,
		// Too late is not the user's doing: the user may try again.
		FreeUserGuard: r.reason == steps.ReasonDeadline})
	if err != nil {
		// Unknown whether Redis applied it: the retry runs the script again and
		// the marker makes that harmless.
		return lua.CompensateReply{}, err
	}
	if err := s.fp.Check(failpoint.AfterCompensationLua); err != nil {
		return lua.CompensateReply{}, err
	}
	return reply, nil
}

// compensationSubject is what the compensation needs of the reservation row.
type compensationSubject struct {
	status state.Reservation
	userID int64
	reason string
}

// authorizeCompensation moves ORDER_REJECTED → COMPENSATING (the durable
// decision) and returns the reservation's status after it.
func (s *Store) authorizeCompensation(ctx context.Context, rid uuid.UUID) (compensationSubject, error) {
	var r compensationSubject
	var reason *string
	var moved bool
	err := s.pool.QueryRow(ctx, `
		WITH moved AS (
			UPDATE inventory_reservation SET status = 'COMPENSATING', version = version + 1, updated_at = clock_timestamp()
			WHERE reservation_id = $1 AND status = 'ORDER_REJECTED'
			RETURNING status, user_id, reason_code)
		SELECT status, user_id, reason_code, true FROM moved
		UNION ALL
		SELECT status, user_id, reason_code, false FROM inventory_reservation
		WHERE reservation_id = $1 AND NOT EXISTS (SELECT 1 FROM moved)`, rid).Scan(&r.status, &r.userID, &reason, &moved)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("reservation %s: not in PostgreSQL: %w: nothing to compensate", rid, ErrNotCompensable)
	}
	if err != nil {
		return r, fmt.Errorf("authorize compensation of %s: %w", rid, err)
	}
	if !moved && r.status == state.ReservationOrderRejected {
		// Another caller moved the row while this statement waited for its
		// lock: the UPDATE then matched nothing, and the SELECT beside it saw
		// the statement's older snapshot. A new statement sees the move.
		err = s.pool.QueryRow(ctx, `SELECT status, user_id, reason_code FROM inventory_reservation WHERE reservation_id = $1`, rid).
			Scan(&r.status, &r.userID, &reason)
		if err != nil {
			return r, fmt.Errorf("authorize compensation of %s: read again: %w", rid, err)
		}
	}
	if reason != nil {
		r.reason = *reason
	}
	if moved {
		s.log.InfoContext(ctx, "compensation.authorized", "reservation_id", rid)
	}
	return r, nil
}

// claimTask takes the task's lease; an APPLIED task needs only the PG finish.
func (s *Store) claimTask(ctx context.Context, rid uuid.UUID, owner string) (state.Compensation, error) {
	var status state.Compensation
	err := s.pool.QueryRow(ctx, `
		UPDATE compensation_task
		SET status = 'CLAIMED', lease_owner = $2, lease_until = clock_timestamp() + $3::interval,
		    attempt_count = attempt_count + 1, updated_at = clock_timestamp()
		WHERE task_id = $1
		  AND (status IN ('PENDING', 'RETRY') OR (status = 'CLAIMED' AND lease_until < clock_timestamp()))
		RETURNING status`, CompensationTaskID(rid), owner, CompensationLease.String()).Scan(&status)
	if err == nil {
		return status, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return state.Compensation{}, fmt.Errorf("claim compensation task of %s: %w", rid, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT status FROM compensation_task WHERE task_id = $1`, CompensationTaskID(rid)).Scan(&status); err != nil {
		return state.Compensation{}, fmt.Errorf("read compensation task of %s: %w", rid, err)
	}
	return unclaimedTask(status)
}

// unclaimedTask decides about a task the claim did not take, by its status:
// an APPLIED, VERIFIED or MANUAL task is returned as it is (the caller
// finishes or stops); any other is held by another attempt (ErrLeaseHeld).
func unclaimedTask(status state.Compensation) (state.Compensation, error) {
	switch status {
	case state.CompensationApplied, state.CompensationVerified, state.CompensationManual:
		return status, nil
	}
	return state.Compensation{}, ErrLeaseHeld
}

func (s *Store) finishCompensation(ctx context.Context, rid uuid.UUID, owner, result string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := pg.Exec(ctx, tx, fmt.Sprintf("reservation %s → COMPENSATED", rid), `
			UPDATE inventory_reservation SET status = 'COMPENSATED', version = version + 1, updated_at = clock_timestamp()
			WHERE reservation_id = $1 AND status = 'COMPENSATING'`, rid); err != nil {
			return err
		}
		return pg.Exec(ctx, tx, fmt.Sprintf("compensation task of %s → APPLIED", rid), `
			UPDATE compensation_task SET status = 'APPLIED', lease_owner = NULL, lease_until = NULL,
			    last_result = $3, updated_at = clock_timestamp()
			WHERE task_id = $1 AND (lease_owner = $2 OR status = 'APPLIED')`, CompensationTaskID(rid), owner, result)
	})
}

func (s *Store) toManual(ctx context.Context, rid uuid.UUID, owner, result string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := pg.Exec(ctx, tx, fmt.Sprintf("compensation task of %s → MANUAL", rid), `
			UPDATE compensation_task SET status = 'MANUAL', lease_owner = NULL, lease_until = NULL,
			    last_result = $3, updated_at = clock_timestamp()
			WHERE task_id = $1 AND lease_owner = $2`, CompensationTaskID(rid), owner, result); err != nil {
			return err
		}
		return pg.Exec(ctx, tx, fmt.Sprintf("reservation %s → MANUAL_REVIEW", rid), `
			UPDATE inventory_reservation SET status = 'MANUAL_REVIEW', reason_code = $2, version = version + 1, updated_at = clock_timestamp()
			WHERE reservation_id = $1 AND status = 'COMPENSATING'`, rid, "COMPENSATION_"+result)
	})
}
