package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// branchRecorder drives, on the rig's sale and saga worker, the saga branches
// beyond the paths of TestRecordSagaHistories: the payment signal, the wait
// for a payment being started, the provider reporting a payment during the
// cancel (ClosePaid), the local step falling back to an activity, and the
// branches taken on a step that failed for good.
type branchRecorder struct {
	t        *testing.T
	r        *convRig
	dir      string
	provider *paysim.Client
	store    *payments.Store
	// window is the sale's payment window (seconds) the rig was built with.
	window int
}

// recordBranches records the branch histories (saga_local_<branch>.json and
// refund_held.json); cancelled is a saga that ended CANCELLED, whose order
// gets a late payment the provider then refuses to refund.
func recordBranches(t *testing.T, r *convRig, dir string, cancelled events.OrderCreateRequested) {
	t.Helper()
	if !failpoint.Enabled {
		t.Fatal("the branch histories arm failpoints: run with -tags failpoints")
	}
	b := &branchRecorder{t: t, r: r, dir: dir, store: payments.NewStore(r.conns.Pool, nil),
		provider: &paysim.Client{BaseURL: r.cfg.PaysimURL, MerchantKey: r.cfg.PaysimMerchantKey}}
	if err := r.conns.Pool.QueryRow(context.Background(), `SELECT payment_timeout_seconds FROM sale_activity WHERE activity_id = $1`,
		r.k.ActivityID).Scan(&b.window); err != nil {
		t.Fatal(err)
	}
	b.paymentSignal(17)
	b.paymentStartingThenClosePaid(18)
	b.localFallback(19)
	b.unprocessable(20)
	b.compensationRefused(21)
	b.refundHeld(cancelled)
}

// paymentSignal: a payment signal while the order is still PAYING (the saga
// reads PostgreSQL and waits on), then one after the payment was recorded.
func (b *branchRecorder) paymentSignal(user int64) {
	ctx := context.Background()
	m := b.saga(user, b.longWindow)
	oid := b.created(m)
	txn := b.startPayment(oid)
	b.signal(m, workflows.SignalPayment, workflows.PaymentSignal{TransactionID: txn})
	b.r.state(b.t, m, time.Minute, func(s workflows.SagaState) bool { return hasStep(s, "still waiting") })
	paid, err := b.provider.Pay(ctx, txn, paysim.PayOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	if res, err := b.store.Record(ctx, steps.Evidence{OrderID: oid, Provider: payments.ProviderName, TransactionID: txn,
		AmountCents: 2500, PaidAt: *paid.PaidAt}); err != nil || res.OrderStatus != state.OrderPaid {
		b.t.Fatalf("payment = %+v, %v", res, err)
	}
	b.signal(m, workflows.SignalPayment, workflows.PaymentSignal{TransactionID: txn})
	b.finish("payment_signal", m, state.SagaPaid)
}

// paymentStartingThenClosePaid: the buyer's cancel meets a payment being
// started at the provider (PAYMENT_STARTING: the saga waits and asks
// again); the buyer pays meanwhile, so the cancel's provider close finds the
// payment (ClosePaid) and records it: the order is PAID, never cancelled.
func (b *branchRecorder) paymentStartingThenClosePaid(user int64) {
	ctx := context.Background()
	m := b.saga(user, b.longWindow)
	oid := b.created(m)
	if st, ok, err := b.store.BeginPayment(ctx, oid); err != nil || !ok {
		b.t.Fatalf("begin payment: %s %v", st, err)
	}
	b.signal(m, workflows.SignalCancel, workflows.CancelSignal{Reason: "changed my mind"})
	b.waitEvent(m, "BeginCancel answered PAYMENT_STARTING", func(ev *historypb.HistoryEvent) bool {
		res := ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
		return len(res) == 1 && strings.Contains(string(res[0].GetData()), state.CancelPaymentStarting.String())
	})
	p, err := b.provider.Create(ctx, oid, 2500, "CNY", "http://127.0.0.1:1/cb")
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.provider.Pay(ctx, p.TransactionID, paysim.PayOptions{}); err != nil {
		b.t.Fatal(err)
	}
	if st, ok, err := b.store.OpenPayment(ctx, oid, payments.ProviderName, p.TransactionID); err != nil || !ok {
		b.t.Fatalf("open payment: %s %v", st, err)
	}
	b.finish("payment_starting_close_paid", m, state.SagaPaid)
}

// localFallback: the local CreateOrder fails for as long as it may
// (localFor), the step runs as an activity, which succeeds once the fault
// is gone; the order then expires and is cancelled.
func (b *branchRecorder) localFallback(user int64) {
	b.r.fp.ArmMode(failpoint.AfterOrderInsert, failpoint.Mode{Times: -1})
	defer b.r.fp.Disarm(failpoint.AfterOrderInsert)
	m := b.saga(user)
	b.waitEvent(m, "CreateOrder scheduled as an activity", func(ev *historypb.HistoryEvent) bool {
		return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "CreateOrder"
	})
	b.r.fp.Disarm(failpoint.AfterOrderInsert)
	b.finish("fallback", m, state.SagaCancelled)
}

// unprocessable: the order transaction fails for good (a stray ledger row
// takes this reservation's key: 23505 past its bound), locally and then as
// an activity; the saga rejects the reservation durably
// (RejectUnprocessable), carries on from PostgreSQL and compensates.
func (b *branchRecorder) unprocessable(user int64) {
	ctx := context.Background()
	m := b.saga(user, func(m events.OrderCreateRequested) {
		key := inventory.LedgerOccupyKey(m.ReservationID)
		b.exec(`INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, change_type)
			VALUES ($1, $2, 7, $3, 'STRAY')`, key, m.ActivityID+1, uuid.New())
		b.t.Cleanup(func() {
			_, _ = b.r.conns.Pool.Exec(ctx, `DELETE FROM inventory_ledger WHERE idempotency_key = $1 AND change_type = 'STRAY'`, key)
		})
	})
	b.finish("unprocessable", m, state.SagaCompensated)
}

// compensationRefused: PostgreSQL has no stock, so the order is rejected;
// while its compensation fails (after_compensation_lua) the reservation row
// is moved to a status compensation refuses (RESERVED, by hand). The
// compensation is refused for good and the saga carries on from
// PostgreSQL, which holds nothing to resume: the saga ends.
func (b *branchRecorder) compensationRefused(user int64) {
	b.r.fp.ArmMode(failpoint.AfterCompensationLua, failpoint.Mode{Times: -1})
	defer b.r.fp.Disarm(failpoint.AfterCompensationLua)
	m := b.saga(user, func(events.OrderCreateRequested) {
		b.exec(`UPDATE sku_inventory SET available_stock = 0, initial_stock = initial_stock - available_stock WHERE activity_id = $1`, b.r.k.ActivityID)
	})
	eventually(b.t, time.Minute, "compensation under way", func() error {
		return b.moveOne(`UPDATE inventory_reservation SET status = 'RESERVED' WHERE reservation_id = $1 AND status = 'COMPENSATING'`, m.ReservationID)
	})
	b.r.fp.Disarm(failpoint.AfterCompensationLua)
	b.exec(`UPDATE sku_inventory SET initial_stock = initial_stock + 5, available_stock = available_stock + 5 WHERE activity_id = $1`, b.r.k.ActivityID)
	st := b.finish("compensation_refused", m, state.SagaRejected)
	if !hasStep(st, "compensation refused for good") {
		b.t.Fatalf("saga steps %q, want the refusal", st.Steps)
	}
}

// refundHeld: a payment on a cancelled order that someone already refunded
// at the provider by hand; the provider refuses the refund, the refund is
// held for a person (HoldRefund: refund_task MANUAL) and the run fails.
func (b *branchRecorder) refundHeld(m events.OrderCreateRequested) {
	ctx := context.Background()
	oid := orders.ID(m.ReservationID)
	p, err := b.provider.Create(ctx, oid, 2500, "CNY", "http://127.0.0.1:1/cb")
	if err != nil {
		b.t.Fatal(err)
	}
	paid, err := b.provider.Pay(ctx, p.TransactionID, paysim.PayOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	res, err := b.store.Record(ctx, steps.Evidence{OrderID: oid, Provider: payments.ProviderName,
		TransactionID: p.TransactionID, AmountCents: 2500, PaidAt: *paid.PaidAt})
	if err != nil || res.Outcome != steps.RecordPaidAfterCancel {
		b.t.Fatalf("late payment = %+v, %v", res, err)
	}
	if _, err := b.provider.Refund(ctx, p.TransactionID, "refund-by-hand", 0); err != nil {
		b.t.Fatal(err)
	}
	if err := workflows.StartRefund(ctx, b.r.tc, b.r.cfg.TemporalTaskQueue, workflows.RefundInput{PaymentID: res.PaymentID,
		ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil {
		b.t.Fatal(err)
	}
	refundID := workflows.RefundWorkflowID(res.PaymentID.String())
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := b.r.tc.GetWorkflow(wctx, refundID, "").Get(wctx, nil); err == nil || wctx.Err() != nil {
		b.t.Fatalf("refund run = %v, want it failed on the refusal", err)
	}
	var status string
	if err := b.r.conns.Pool.QueryRow(ctx, `SELECT status FROM refund_task WHERE payment_id = $1`, res.PaymentID).Scan(&status); err != nil || status != "MANUAL" {
		b.t.Fatalf("refund task %s (%v), want MANUAL", status, err)
	}
	record(b.t, b.r.tc, refundID, filepath.Join(b.dir, "refund_held.json"))
}

// longWindow gives the saga's order a payment window long enough for the
// recorder's steps (created puts the rig's window back).
func (b *branchRecorder) longWindow(events.OrderCreateRequested) {
	b.exec(`UPDATE sale_activity SET payment_timeout_seconds = 600 WHERE activity_id = $1`, b.r.k.ActivityID)
}

func (b *branchRecorder) saga(user int64, before ...func(events.OrderCreateRequested)) events.OrderCreateRequested {
	b.t.Helper()
	m, _ := b.r.saga(b.t, user, before...)
	return m
}

// created waits for the saga's order and returns its id.
func (b *branchRecorder) created(m events.OrderCreateRequested) uuid.UUID {
	b.t.Helper()
	st := b.r.state(b.t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	b.exec(`UPDATE sale_activity SET payment_timeout_seconds = $2 WHERE activity_id = $1`, b.r.k.ActivityID, b.window)
	return uuid.MustParse(st.OrderID)
}

// startPayment starts the order's payment as checkout.StartPayment does.
func (b *branchRecorder) startPayment(oid uuid.UUID) string {
	b.t.Helper()
	ctx := context.Background()
	if st, ok, err := b.store.BeginPayment(ctx, oid); err != nil || !ok {
		b.t.Fatalf("begin payment: %s %v", st, err)
	}
	p, err := b.provider.Create(ctx, oid, 2500, "CNY", "http://127.0.0.1:1/cb")
	if err != nil {
		b.t.Fatal(err)
	}
	if st, ok, err := b.store.OpenPayment(ctx, oid, payments.ProviderName, p.TransactionID); err != nil || !ok {
		b.t.Fatalf("open payment: %s %v", st, err)
	}
	return p.TransactionID
}

func (b *branchRecorder) signal(m events.OrderCreateRequested, name string, arg any) {
	b.t.Helper()
	if err := b.r.tc.SignalWorkflow(context.Background(), workflows.ReservationWorkflowID(m.ReservationID.String()), "", name, arg); err != nil {
		b.t.Fatal(err)
	}
}

// waitEvent waits until the saga's history holds an event ok accepts.
func (b *branchRecorder) waitEvent(m events.OrderCreateRequested, what string, ok func(*historypb.HistoryEvent) bool) {
	b.t.Helper()
	ctx := context.Background()
	eventually(b.t, 2*time.Minute, what, func() error {
		it := b.r.tc.GetWorkflowHistory(ctx, workflows.ReservationWorkflowID(m.ReservationID.String()), "", false,
			enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return err
			}
			if ok(ev) {
				return nil
			}
		}
		return errNotYet
	})
}

// finish waits for the saga to end with want and records its history as
// saga_local_<name>.json.
func (b *branchRecorder) finish(name string, m events.OrderCreateRequested, want state.Saga) workflows.SagaState {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := workflows.ReservationWorkflowID(m.ReservationID.String())
	var st workflows.SagaState
	if err := b.r.tc.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil || st.Status != want {
		b.t.Fatalf("%s: saga ended %s (%v), steps %q, want %s", name, st.Status, err, st.Steps, want)
	}
	record(b.t, b.r.tc, id, filepath.Join(b.dir, "saga_local_"+name+".json"))
	return st
}

func (b *branchRecorder) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.r.conns.Pool.Exec(context.Background(), sql, args...); err != nil {
		b.t.Fatal(err)
	}
}

// moveOne runs an UPDATE that must move exactly one row.
func (b *branchRecorder) moveOne(sql string, args ...any) error {
	tag, err := b.r.conns.Pool.Exec(context.Background(), sql, args...)
	if err == nil && tag.RowsAffected() != 1 {
		return errNotYet
	}
	return err
}

// errNotYet: what eventually waits for is not there yet.
var errNotYet = errors.New("not yet")

func hasStep(s workflows.SagaState, part string) bool {
	for _, step := range s.Steps {
		if strings.Contains(step, part) {
			return true
		}
	}
	return false
}
