package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// TestRecordSagaHistories records, from real sagas on the dev server, the
// histories workflows.TestReplayRecordedHistories replays: one per saga path
// beyond the first three (paid, compensated, cancelled), and the branches of
// recordBranches (payment signal, PAYMENT_STARTING, ClosePaid, the local
// step's fallback, CreateOrder and compensation failed for good, the refund
// held). A history already in testdata is kept (record). Run it after a
// deliberate, versioned workflow change (docs/architecture.md, "Changing
// workflow code"):
//
//	SECKILL_RECORD_HISTORIES=1 SECKILL_INTEGRATION=1 go test -tags failpoints -count=1 -run TestRecordSagaHistories ./e2e/
func TestRecordSagaHistories(t *testing.T) {
	if os.Getenv("SECKILL_RECORD_HISTORIES") != "1" {
		t.Skip("records workflows/testdata: set SECKILL_RECORD_HISTORIES=1")
	}
	r := newConvRig(t, 3*time.Second)
	ctx := context.Background()
	dir := filepath.Join("..", "workflows", "testdata")
	signal := func(m events.OrderCreateRequested, name string, arg any) {
		t.Helper()
		if err := r.tc.SignalWorkflow(ctx, workflows.ReservationWorkflowID(m.ReservationID.String()), "", name, arg); err != nil {
			t.Fatal(err)
		}
	}
	repair := func(m events.OrderCreateRequested, action string) steps.RepairRequest {
		return steps.RepairRequest{Action: action, RepairID: action + "-" + m.ReservationID.String()[:8], Operator: "recorder", Reason: "recorded path"}
	}
	done := func(name string, m events.OrderCreateRequested, want state.Saga) {
		t.Helper()
		r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == want })
		record(t, r.tc, workflows.ReservationWorkflowID(m.ReservationID.String()), filepath.Join(dir, "saga_local_"+name+".json"))
	}
	stuck := func(user int64) events.OrderCreateRequested {
		var saved map[string]string
		m, _ := r.saga(t, user, func(m events.OrderCreateRequested) {
			r.conns.Pool.Exec(ctx, `UPDATE sku_inventory SET available_stock = 0, initial_stock = initial_stock - available_stock WHERE activity_id = $1`, r.k.ActivityID)
			saved = r.conns.Redis.HGetAll(ctx, r.k.Reservation(m.ReservationID.String())).Val()
			r.conns.Redis.Del(ctx, r.k.Reservation(m.ReservationID.String()))
		})
		r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaManual })
		r.conns.Redis.HSet(ctx, r.k.Reservation(m.ReservationID.String()), saved) // the key is back (restored by hand)
		return m
	}
	restock := func() {
		r.conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = initial_stock + 5, available_stock = available_stock + 5 WHERE activity_id = $1`, r.k.ActivityID)
	}

	// Manual review, then each repair action that ends it.
	m := stuck(11)
	signal(m, workflows.SignalRepair, repair(m, steps.RepairRetryCompensation))
	done("manual_retry_compensation", m, state.SagaCompensated)
	m = stuck(12)
	signal(m, workflows.SignalRepair, steps.RepairRequest{Action: "no-such-action", RepairID: "bad-" + m.ReservationID.String()[:8], Operator: "recorder", Reason: "refused"})
	signal(m, workflows.SignalRepair, repair(m, steps.RepairMarkResolved))
	done("manual_mark_resolved", m, state.SagaResolved)
	restock()

	// An order: rebuild its projection, then force-cancel it.
	m, _ = r.saga(t, 13)
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	signal(m, workflows.SignalRepair, repair(m, steps.RepairRebuildProjection))
	signal(m, workflows.SignalRepair, repair(m, steps.RepairForceCancelUnpaid))
	done("rebuild_projection_force_cancel", m, state.SagaCancelled)

	// The buyer cancels.
	m, _ = r.saga(t, 14)
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	signal(m, workflows.SignalCancel, workflows.CancelSignal{Reason: "changed my mind"})
	done("user_cancel", m, state.SagaCancelled)
	userCancelled := m

	// A late message: the reservation was decided before it arrived.
	m, _ = r.saga(t, 15, func(m events.OrderCreateRequested) {
		if _, err := r.conns.Pool.Exec(ctx, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id,
			status, reason_code, reserved_at, business_deadline) VALUES ($1, $2, $3, $4, $5, $6, 'COMPENSATED', 'BUSINESS_DEADLINE_EXCEEDED', $7, $8)`,
			m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline); err != nil {
			t.Fatal(err)
		}
	})
	done("late", m, state.SagaLate)

	// A lost saga resumed from PostgreSQL: its order expired meanwhile.
	m, run := r.saga(t, 16)
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	if err := r.tc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "recorded: lost"); err != nil {
		t.Fatal(err)
	}
	r.conns.Pool.Exec(ctx, `UPDATE orders SET expires_at = now() - interval '1 minute' WHERE reservation_id = $1`, m.ReservationID)
	rm, err := activities.ReservationMessage(ctx, r.conns.Pool, m.ReservationID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.tc.ExecuteWorkflow(ctx, workflows.ResumeStartOptions(r.cfg.TemporalTaskQueue, rm), workflows.ReservationSaga,
		workflows.SagaInput{Message: rm, Resume: true, LocalForward: true}); err != nil {
		t.Fatal(err)
	}
	done("resumed", m, state.SagaCancelled)

	// A payment on the cancelled order: its refund.
	provider := &paysim.Client{BaseURL: r.cfg.PaysimURL, MerchantKey: r.cfg.PaysimMerchantKey}
	oid := orders.ID(m.ReservationID)
	p, err := provider.Create(ctx, oid, 2500, "CNY", "http://127.0.0.1:1/cb")
	if err != nil {
		t.Fatal(err)
	}
	paid, err := provider.Pay(ctx, p.TransactionID, paysim.PayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := payments.NewStore(r.conns.Pool, nil).Record(ctx, steps.Evidence{OrderID: oid, Provider: payments.ProviderName,
		TransactionID: p.TransactionID, AmountCents: 2500, PaidAt: *paid.PaidAt})
	if err != nil || res.Outcome != steps.RecordPaidAfterCancel {
		t.Fatalf("late payment = %+v, %v", res, err)
	}
	in := workflows.RefundInput{PaymentID: res.PaymentID, ActivityID: m.ActivityID, SKUID: m.SKUID}
	if err := workflows.StartRefund(ctx, r.tc, r.cfg.TemporalTaskQueue, in); err != nil {
		t.Fatal(err)
	}
	refundID := workflows.RefundWorkflowID(res.PaymentID.String())
	var status state.Saga
	if err := r.tc.GetWorkflow(ctx, refundID, "").Get(ctx, &status); err != nil || status != state.SagaRefunded {
		t.Fatalf("refund = %s, %v", status, err)
	}
	record(t, r.tc, refundID, filepath.Join(dir, "refund_paid_after_cancel.json"))

	// The branches of the payment protocol and of steps that fail
	// (histories_branches_test.go).
	recordBranches(t, r, dir, userCancelled)
}

// record writes a closed workflow's history as `temporal workflow show
// --output json` does. A history already in testdata is kept: it is the
// proof that sagas started by the code that recorded it still replay
// (delete the file to record its path again).
func record(t *testing.T, tc client.Client, workflowID, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Logf("kept %s (recorded before)", path)
		return
	}
	ctx := context.Background()
	it := tc.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", path, len(h.Events))
}
