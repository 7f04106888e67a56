package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/explain"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// explainOne runs `seckill explain` as the command does (reconciliation's
// watermark and all) and logs its text.
func (r *convRig) explainOne(t *testing.T, rid uuid.UUID) explain.Report {
	t.Helper()
	ex, err := app.Explainer(r.cfg, r.conns)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ex.Explain(context.Background(), rid)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_ = rep.WriteText(&b)
	t.Logf("seckill explain %s:\n%s", rid, b.String())
	return rep
}

// runRepairCommand runs the `seckill repair apply` command explain printed,
// its placeholders filled in, as the command does (app.Repair).
func (r *convRig) runRepairCommand(t *testing.T, command, ticket string) app.RepairOutcome {
	t.Helper()
	f := strings.Fields(command)
	if len(f) < 6 || strings.Join(f[:3], " ") != "seckill repair apply" || f[4] != "--action" {
		t.Fatalf("explain's command %q is not a seckill repair apply", command)
	}
	rid, err := uuid.Parse(f[3])
	if err != nil {
		t.Fatal(err)
	}
	out, err := app.Repair(context.Background(), r.conns, r.cfg.TemporalTaskQueue, steps.RepairRequest{ReservationID: rid, Action: f[5],
		RepairID: ticket + "-" + rid.String(), Operator: "alice", Reason: ticket + ": Redis key restored from backup"}, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return out
}

func (r *convRig) reservationStatus(t *testing.T, rid uuid.UUID) (state.Reservation, state.Compensation) {
	t.Helper()
	var rs state.Reservation
	var ts *state.Compensation
	if err := r.conns.Pool.QueryRow(context.Background(), `SELECT r.status, t.status FROM inventory_reservation r
		LEFT JOIN compensation_task t ON t.reservation_id = r.reservation_id WHERE r.reservation_id = $1`, rid).Scan(&rs, &ts); err != nil {
		t.Fatal(err)
	}
	if ts == nil {
		return rs, state.Compensation{}
	}
	return rs, *ts
}

// A saga waiting in MANUAL_REVIEW (its Redis hash was lost before the
// compensation) is terminated: no signal reaches it any more. Once the hash
// is restored, explain prints `seckill repair apply ... retry-compensation`;
// that command resumes the saga from PostgreSQL with the repair, which
// compensates: the reservation ends COMPENSATED and its unit is back in
// Redis, once.
func TestClosedSagaInManualReviewIsRepairedByTheCommandExplainPrints(t *testing.T) {
	r := newConvRig(t, 900*time.Second)
	ctx := context.Background()
	var saved map[string]string
	m, run := r.saga(t, 21, func(m events.OrderCreateRequested) {
		if _, err := r.conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = 0, available_stock = 0 WHERE activity_id = $1`, r.k.ActivityID); err != nil {
			t.Fatal(err)
		}
		key := r.k.Reservation(m.ReservationID.String())
		saved = r.conns.Redis.HGetAll(ctx, key).Val()
		r.conns.Redis.Del(ctx, key)
	})
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaManual })
	if err := r.tc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "by mistake"); err != nil {
		t.Fatal(err)
	}
	wfID := workflows.ReservationWorkflowID(m.ReservationID.String())
	if err := r.tc.SignalWorkflow(ctx, wfID, "", workflows.SignalRepair, struct{}{}); err == nil {
		t.Fatal("a repair signal reached a terminated saga: the scenario is wrong")
	}
	// The operator restores the hash from a backup.
	if err := r.conns.Redis.HSet(ctx, r.k.Reservation(m.ReservationID.String()), saved).Err(); err != nil {
		t.Fatal(err)
	}
	rep := r.explainOne(t, m.ReservationID)
	if rep.Saga == nil || rep.Saga.Status != "TERMINATED" || rep.Verdict.Consistent || rep.Verdict.Action != "retry-compensation" {
		t.Fatalf("explain: saga %+v verdict %+v; want TERMINATED, retry-compensation", rep.Saga, rep.Verdict)
	}
	out := r.runRepairCommand(t, rep.Verdict.Command, "INC-51")
	if out.Status != state.RepairApplied {
		t.Fatalf("repair: %+v, want APPLIED", out)
	}
	eventually(t, time.Minute, "the resumed saga compensates", func() error {
		if rs, ts := r.reservationStatus(t, m.ReservationID); rs != state.ReservationCompensated || ts != state.CompensationApplied {
			return fmt.Errorf("reservation %s, compensation task %s", rs, ts)
		}
		return nil
	})
	if st := r.conns.Redis.HGet(ctx, r.k.Reservation(m.ReservationID.String()), "status").Val(); st != "COMPENSATED" {
		t.Errorf("redis reservation %s, want COMPENSATED", st)
	}
	if c := r.conns.Redis.HGetAll(ctx, r.k.Counter()).Val(); c["available"] != "10" || c["open_reserved"] != "0" || c["compensated_total"] != "1" {
		t.Errorf("redis counters %v: want the unit back once (available 10, open_reserved 0, compensated_total 1)", c)
	}
	if again := r.runRepairCommand(t, rep.Verdict.Command, "INC-51"); !again.Duplicate || again.Status != state.RepairApplied {
		t.Errorf("the same command again: %+v, want the recorded decision and nothing sent", again)
	}
	if rep := r.explainOne(t, m.ReservationID); !rep.Verdict.Consistent {
		t.Errorf("after the repair explain says %+v", rep.Verdict)
	}
}

// Reservations that never had a saga (their message never reached the
// starter) are rejected past their deadline, lose their Redis hash, and
// reconciliation's own compensation puts them in MANUAL_REVIEW. `seckill
// repair bulk --manual-review-of <sale>` lists them from PostgreSQL and
// resolves every one through a saga started for it; run again it finds none.
func TestBulkRepairReachesManualReviewWithoutASaga(t *testing.T) {
	const n = 3
	r := newConvRig(t, 900*time.Second)
	ctx := context.Background()
	inv := testenv.Stores(t, r.conns.Pool, r.conns.Redis, nil).Inventory
	var rids []uuid.UUID
	for i := range n {
		m := testenv.MustReserve(t, r.conns.Redis, r.d, r.k, int64(31+i))
		m.ReservedAt, m.BusinessDeadline = time.Now().Add(-2*time.Minute).UTC(), time.Now().Add(-time.Minute).UTC()
		if st, err := inv.RejectOverdue(ctx, inventory.RejectInput{ReservationID: m.ReservationID, Grace: time.Millisecond, Unseen: &m}); err != nil || st != state.ReservationOrderRejected {
			t.Fatalf("reject: %s %v", st, err)
		}
		r.conns.Redis.Del(ctx, r.k.Reservation(m.ReservationID.String()))
		rids = append(rids, m.ReservationID)
		t.Cleanup(func() {
			_ = r.tc.TerminateWorkflow(context.Background(), workflows.ReservationWorkflowID(m.ReservationID.String()), "", "e2e cleanup")
		})
	}
	if _, err := r.conns.Pool.Exec(ctx, `UPDATE inventory_reservation SET updated_at = now() - interval '1 minute' WHERE activity_id = $1`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}
	run, err := r.reconciler(t).Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	stalled := 0
	for _, a := range run.Anomalies {
		if a.Type == reconcile.CompensationStall {
			stalled++
		}
	}
	for _, rid := range rids {
		if rs, ts := r.reservationStatus(t, rid); rs != state.ReservationManualReview || ts != state.CompensationManual {
			t.Fatalf("after reconciliation %s is %s / %s, want MANUAL_REVIEW / MANUAL (report %+v)", rid, rs, ts, run.Anomalies)
		}
	}
	if stalled != n {
		t.Fatalf("%d COMPENSATION_STALLED, want %d", stalled, n)
	}
	rep := r.explainOne(t, rids[0])
	if rep.Saga == nil || rep.Saga.Status != "NOT_FOUND" || !strings.HasPrefix(rep.Verdict.Command, "seckill repair apply "+rids[0].String()+" --action mark-resolved") {
		t.Fatalf("explain: saga %+v verdict %+v", rep.Saga, rep.Verdict)
	}

	// No saga runs for them: a bulk repair by a visibility query lists none.
	byQuery := workflows.BulkRepairInput{Query: fmt.Sprintf("ActivityId = %d", r.k.ActivityID), Action: "mark-resolved", Operator: "alice",
		Reason: "INC-52", PerSecond: 1000, Limit: 1000}
	if b := runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, byQuery, true); b.Listed != 0 {
		t.Fatalf("bulk repair by query listed %s", summary(b))
	}
	in := workflows.BulkRepairInput{ManualReviewOf: r.k.ActivityID, Action: "mark-resolved", Operator: "alice",
		Reason: "INC-52: units counted by the Redis rebuild", PerSecond: 1000, Limit: 1000}
	if b := runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, in, true); b.Listed != n || b.Would != n {
		t.Fatalf("dry run: %s, want %d would apply", summary(b), n)
	}
	if b := runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, in, false); b.Applied != n {
		t.Fatalf("bulk repair: %s, want %d applied", summary(b), n)
	}
	for _, rid := range rids {
		eventually(t, time.Minute, "the repair is recorded and the saga resolves "+rid.String(), func() error {
			var st string
			err := r.conns.Pool.QueryRow(ctx, `SELECT status FROM repair_task WHERE object_id = $1 AND rule_name = 'MANUAL:mark-resolved'`, rid.String()).Scan(&st)
			if err != nil || st != "APPLIED" {
				return fmt.Errorf("repair_task %q %v", st, err)
			}
			return nil
		})
		m := events.OrderCreateRequested{ReservationID: rid}
		r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaResolved })
	}
	if rep := r.explainOne(t, rids[0]); !rep.Verdict.Consistent {
		t.Errorf("after the bulk repair explain says %+v", rep.Verdict)
	}
	if b := runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, in, false); b.Listed != 0 {
		t.Errorf("bulk repair again: %s, want nothing listed", summary(b))
	}
	// Bad input is refused before anything starts.
	both, neither, negative := in, in, in
	both.Query, neither.ManualReviewOf, negative.ManualReviewOf = byQuery.Query, 0, -1
	for _, bad := range []workflows.BulkRepairInput{both, neither, negative} {
		if _, err := app.StartBulkRepair(ctx, r.conns.Temporal, r.cfg.TemporalTaskQueue, bad); err == nil {
			t.Errorf("bulk repair %+v started", bad)
		}
	}
	for _, bad := range []steps.RepairRequest{{ReservationID: rids[0], Action: "delete-it", RepairID: "x", Operator: "a", Reason: "r"},
		{ReservationID: rids[0], Action: "mark-resolved", Operator: "a", Reason: "r"},
		{ReservationID: rids[0], Action: "force-cancel-unpaid", RepairID: "INC-53-x", Operator: "a", Reason: "r"}} {
		if out, err := app.Repair(ctx, r.conns, r.cfg.TemporalTaskQueue, bad, time.Second); err == nil {
			t.Errorf("repair %+v accepted: %+v", bad, out)
		}
	}
}
