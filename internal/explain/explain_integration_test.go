package explain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/explain"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type rig struct {
	pool *pgxpool.Pool
	rdb  redis.UniversalClient
	acts *activities.Activities
	pay  *payments.Store
	ex   *explain.Explainer
	k    lua.Keys
	ids  *ids.Deriver
	user int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	k := testenv.Sale(t, pool, rdb, 4, 20, 1999)
	verify, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verify.Close)
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: verify, Redis: rdb, Log: quiet, Topic: cfg.TopicOrderCreate, TerminalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := explain.New(pool, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{pool: pool, rdb: rdb, acts: acts, pay: payments.NewStore(pool, nil), ex: ex, k: k, ids: testenv.Deriver(t, cfg), user: 100}
}

// reserve admits a new user in Redis and returns the gateway's message.
func (r *rig) reserve(t *testing.T) events.OrderCreateRequested {
	t.Helper()
	r.user++
	return testenv.MustReserve(t, r.rdb, r.ids, r.k, r.user)
}

// order reserves and creates the order with its Redis projection, as the saga does.
func (r *rig) order(t *testing.T) (events.OrderCreateRequested, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m := r.reserve(t)
	res, err := r.acts.CreateOrder(ctx, m)
	if err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatalf("create order: %+v %v", res, err)
	}
	if _, err := r.acts.ProjectOrderCreated(ctx, steps.ProjectionInput{ReservationID: m.ReservationID, OrderID: res.OrderID,
		ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil {
		t.Fatal(err)
	}
	return m, res.OrderID
}

func (r *rig) cancel(t *testing.T, m events.OrderCreateRequested, oid uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.pay.BeginCancel(ctx, oid, false); err != nil {
		t.Fatal(err)
	}
	if st, err := r.pay.FinalCancel(ctx, oid); err != nil || st != state.OrderCancelled {
		t.Fatalf("final cancel: %s %v", st, err)
	}
	if _, err := r.acts.ReleaseRedis(ctx, steps.ReleaseInput{ReservationID: m.ReservationID, OrderID: oid,
		ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) paid(t *testing.T, oid uuid.UUID, txn string) steps.RecordResult {
	t.Helper()
	res, err := r.pay.Record(context.Background(), steps.Evidence{OrderID: oid, Provider: "paysim", TransactionID: txn,
		AmountCents: 1999, PaidAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (r *rig) explain(t *testing.T, id uuid.UUID) explain.Report {
	t.Helper()
	rep, err := r.ex.Explain(context.Background(), id)
	if err != nil {
		t.Fatalf("explain %s: %v", id, err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("explain %s:\n%s", id, text.String())
	return rep
}

func sources(rep explain.Report) map[string]int {
	out := map[string]int{}
	for _, e := range rep.Timeline {
		out[strings.Fields(e.Source)[0]]++
	}
	return out
}

func wantConsistent(t *testing.T, rep explain.Report, note string) {
	t.Helper()
	if !rep.Verdict.Consistent || !strings.Contains(rep.Verdict.Note, note) {
		t.Errorf("verdict %+v, want consistent with a note containing %q", rep.Verdict, note)
	}
}

func wantProblem(t *testing.T, rep explain.Report, invariant, action string) {
	t.Helper()
	v := rep.Verdict
	if v.Consistent || len(v.Problems) == 0 || v.Problems[0].Invariant != invariant || !strings.Contains(v.Action, action) || v.Command == "" {
		t.Errorf("verdict %+v, want %s off with action %q and a command", v, invariant, action)
	}
}

func TestExplainPaidOrderByEachOfItsIDs(t *testing.T) {
	r := newRig(t)
	m, oid := r.order(t)
	res := r.paid(t, oid, "txn_paid")
	for _, id := range []uuid.UUID{m.ReservationID, oid, res.PaymentID} {
		rep := r.explain(t, id)
		if rep.ReservationID != m.ReservationID || rep.OrderID == nil || *rep.OrderID != oid {
			t.Fatalf("explain %s found reservation %s order %v", id, rep.ReservationID, rep.OrderID)
		}
		wantConsistent(t, rep, "paid")
	}
	rep := r.explain(t, res.PaymentID)
	if rep.Kind != explain.KindPayment || rep.Status.Order != state.OrderPaid || rep.Status.Redis != state.ReservationOrderCreated.String() {
		t.Errorf("kind %s statuses %+v", rep.Kind, rep.Status)
	}
	got := sources(rep)
	for _, s := range []string{"inventory_reservation", "consumer_inbox", "orders", "payment_record", "inventory_ledger", "event_outbox", "redis"} {
		if got[s] == 0 {
			t.Errorf("timeline has no %s event: %v", s, got)
		}
	}
	for i := 1; i < len(rep.Timeline); i++ {
		if rep.Timeline[i].At.Before(rep.Timeline[i-1].At) {
			t.Fatalf("timeline not oldest first at %d: %v then %v", i, rep.Timeline[i-1].At, rep.Timeline[i].At)
		}
	}
	if rep.Redis.UserGuard != m.ReservationID.String() || rep.Redis.RequestMap != m.ReservationID.String() {
		t.Errorf("redis guards %+v", rep.Redis)
	}
}

func TestExplainCancelledAndRefunded(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	m, oid := r.order(t)
	r.cancel(t, m, oid)
	wantConsistent(t, r.explain(t, oid), "cancelled")

	// A payment lands after the cancel: owed back until the refund is done.
	res := r.paid(t, oid, "txn_late")
	if res.Outcome != steps.RecordPaidAfterCancel {
		t.Fatalf("late payment: %s", res.Outcome)
	}
	owed := r.explain(t, oid)
	if owed.Verdict.Consistent || owed.Verdict.Problems[0].Invariant != "I5" {
		t.Errorf("payment on a cancelled order, refund pending: %+v", owed.Verdict)
	}
	ref, _, err := r.pay.BeginRefund(ctx, res.PaymentID)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pay.FinishRefund(ctx, ref); err != nil {
		t.Fatal(err)
	}
	rep := r.explain(t, res.PaymentID)
	wantConsistent(t, rep, "refunded")
	if rep.Status.Order != state.OrderRefunded || rep.Status.RefundTasks[state.RefundDone] != 1 {
		t.Errorf("statuses %+v", rep.Status)
	}
}

func TestExplainCompensatedLateManualAndResolved(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	// Compensated: the order service rejects a reservation past its deadline.
	m := r.reserve(t)
	m.ReservedAt, m.BusinessDeadline = time.Now().Add(-2*time.Minute).UTC(), time.Now().Add(-time.Minute).UTC()
	if res, err := r.acts.CreateOrder(ctx, m); err != nil || res.Outcome != steps.OutcomeRejected {
		t.Fatalf("create past deadline: %+v %v", res, err)
	}
	if c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil || c.Status != state.ReservationCompensated {
		t.Fatalf("compensate: %+v %v", c, err)
	}
	rep := r.explain(t, m.ReservationID)
	wantConsistent(t, rep, "rejected")
	if rep.Redis.CompensationMarker == "" {
		t.Errorf("no compensation marker in %+v", rep.Redis)
	}

	// Late: its message arrives after the reservation was compensated.
	if res, err := r.acts.CreateOrder(ctx, m); err != nil || !res.Duplicate {
		t.Fatalf("redelivery: %+v %v", res, err)
	}
	late := r.reserve(t)
	late.ReservedAt, late.BusinessDeadline = time.Now().Add(-2*time.Minute).UTC(), time.Now().Add(-time.Minute).UTC()
	if st, err := r.acts.RejectOverdue(ctx, inventory.RejectInput{ReservationID: late.ReservationID, Grace: time.Millisecond, Unseen: &late}); err != nil || st != state.ReservationOrderRejected {
		t.Fatalf("reject overdue: %s %v", st, err)
	}
	if _, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: late.ReservationID, ActivityID: late.ActivityID, SKUID: late.SKUID}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.acts.CreateOrder(ctx, late); err != nil || res.Outcome != steps.OutcomeLate {
		t.Fatalf("late message: %+v %v", res, err)
	}
	wantConsistent(t, r.explain(t, late.ReservationID), "rejected")

	// Manual review: the Redis reservation is gone when the unit is given back.
	lost := r.reserve(t)
	lost.ReservedAt, lost.BusinessDeadline = time.Now().Add(-2*time.Minute).UTC(), time.Now().Add(-time.Minute).UTC()
	if _, err := r.acts.CreateOrder(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r.rdb.Del(ctx, r.k.Reservation(lost.ReservationID.String()))
	if c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: lost.ReservationID, ActivityID: lost.ActivityID, SKUID: lost.SKUID}); err != nil || c.Status != state.ReservationManualReview {
		t.Fatalf("compensate without Redis: %+v %v", c, err)
	}
	manual := r.explain(t, lost.ReservationID)
	wantProblem(t, manual, "I4", "mark-resolved")
	if !strings.Contains(manual.Verdict.Command, "seckill repair apply "+lost.ReservationID.String()+" --action mark-resolved") {
		t.Errorf("command %q", manual.Verdict.Command)
	}

	// Resolved: the operator attests it was settled outside the system.
	res, err := r.acts.ApplyRepair(ctx, steps.RepairRequest{Action: steps.RepairMarkResolved, RepairID: "INC-1-" + lost.ReservationID.String(),
		Operator: "alice", Reason: "INC-1: refunded by hand", ReservationID: lost.ReservationID})
	if err != nil || !res.Accepted {
		t.Fatalf("mark resolved: %+v %v", res, err)
	}
	wantConsistent(t, r.explain(t, lost.ReservationID), "resolved")
}

// A deliberately broken purchase: the order exists in PostgreSQL but its
// Redis projection never ran, and no saga runs for it.
func TestExplainFindsABrokenProjection(t *testing.T) {
	r := newRig(t)
	m := r.reserve(t)
	res, err := r.acts.CreateOrder(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.explain(t, res.OrderID)
	wantProblem(t, rep, "I7", "reconcile")
	if rep.Verdict.Command != fmt.Sprintf("seckill reconcile run --activity %d", m.ActivityID) {
		t.Errorf("command %q", rep.Verdict.Command)
	}
}

func TestExplainUnknownAndRedisOnlyIDs(t *testing.T) {
	r := newRig(t)
	if _, err := r.ex.Explain(context.Background(), uuid.New()); !errors.Is(err, explain.ErrUnknownID) {
		t.Fatalf("unknown id: %v, want ErrUnknownID", err)
	}
	// Admitted in Redis, its message not yet at the order service.
	m := r.reserve(t)
	rep := r.explain(t, m.ReservationID)
	if !rep.Status.Reservation.IsZero() || rep.Status.Redis != state.ReservationReserved.String() || rep.Redis.SendDueAt == nil {
		t.Errorf("statuses %+v redis %+v", rep.Status, rep.Redis)
	}
	wantConsistent(t, rep, "on its way")
	// With its sale named, it is found among that sale's SKUs; under another
	// sale it is not looked for anywhere else.
	in, err := r.ex.ExplainIn(context.Background(), m.ReservationID, m.ActivityID)
	if err != nil || in.Status.Redis != state.ReservationReserved.String() || in.SKUID != m.SKUID {
		t.Errorf("ExplainIn its own sale = %+v, %v", in.Status, err)
	}
	if _, err := r.ex.ExplainIn(context.Background(), m.ReservationID, m.ActivityID+1); !errors.Is(err, explain.ErrUnknownID) {
		t.Errorf("ExplainIn another sale = %v, want ErrUnknownID", err)
	}
}
