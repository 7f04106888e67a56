package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/checkout"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// convRig is one sale on the real stack with the saga worker of this test
// (its own task queue) and the payment provider simulator; sagas are started
// by the test itself (no scanner or starter sees its reservations).
type convRig struct {
	cfg   config.Config
	conns *app.Conns
	tc    client.Client
	fp    *failpoint.Set
	k     lua.Keys
	d     *ids.Deriver
}

func newConvRig(t *testing.T, paymentTimeout time.Duration) *convRig {
	t.Helper()
	cfg := e2eConfig(t)
	cfg.PaysimURL = startPaysim(t, cfg.PaysimSecretBytes(), cfg.PaysimMerchantKey)
	ctx := context.Background()
	conns, err := app.Open(ctx, cfg, "seckill-e2e-convergence", true, logger(), nil)
	if err != nil {
		t.Fatalf("connect to the stack: %v", err)
	}
	t.Cleanup(conns.Close)
	r := &convRig{cfg: cfg, conns: conns, tc: conns.Temporal, fp: &failpoint.Set{}, d: testenv.Deriver(t, cfg)}
	now := time.Now()
	def := sale.Activity{ActivityID: testenv.ActivityID(), Name: "e2e convergence", StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: int(paymentTimeout / time.Second), OrderDeadlineSeconds: 300,
		SKUs: []sale.SKU{{SKUID: 7, Stock: 10, PriceCents: 2500}}}
	r.k = lua.Keys{ActivityID: def.ActivityID, SKUID: 7}
	t.Cleanup(func() {
		bg := context.Background()
		conns.Redis.SRem(bg, lua.ActiveSKUs, fmt.Sprintf("%d:%d", r.k.ActivityID, r.k.SKUID))
		testenv.DeleteSKUKeys(bg, conns.Redis, r.k)
	})
	if _, err := sale.Setup(ctx, conns.Pool, conns.Redis, def); err != nil {
		t.Fatalf("sale set-up: %v", err)
	}
	// No send-due scanner on this Redis may send these reservations.
	conns.Redis.SRem(ctx, lua.ActiveSKUs, fmt.Sprintf("%d:%d", r.k.ActivityID, r.k.SKUID))
	wctx, stop := context.WithCancel(context.Background())
	werr := make(chan error, 1)
	go func() {
		werr <- app.RunWorkers(wctx, cfg, conns, []string{app.PartSaga}, app.NewTelemetry(), r.fp, logger())
	}()
	t.Cleanup(func() {
		stop()
		if err := <-werr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("saga worker: %v", err)
		}
	})
	return r
}

// saga admits user in Redis and starts the reservation's saga as the saga
// starter does; the saga is terminated at the end of the test if it runs.
func (r *convRig) saga(t *testing.T, user int64, before ...func(events.OrderCreateRequested)) (events.OrderCreateRequested, client.WorkflowRun) {
	t.Helper()
	m := testenv.MustReserve(t, r.conns.Redis, r.d, r.k, user)
	for _, f := range before {
		f(m)
	}
	run, err := r.tc.ExecuteWorkflow(context.Background(), workflows.SagaStartOptions(r.cfg.TemporalTaskQueue, m), workflows.ReservationSaga,
		workflows.SagaInput{Message: m, LocalForward: true})
	if err != nil {
		t.Fatalf("start saga: %v", err)
	}
	t.Cleanup(func() {
		_ = r.tc.TerminateWorkflow(context.Background(), run.GetID(), "", "e2e cleanup")
	})
	return m, run
}

// state waits until the saga's query handler answers a state ok accepts.
func (r *convRig) state(t *testing.T, m events.OrderCreateRequested, within time.Duration, ok func(workflows.SagaState) bool) workflows.SagaState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return uiWaitSagaState(ctx, t, r.tc, workflows.ReservationWorkflowID(m.ReservationID.String()), ok)
}

// eventually retries f until it succeeds or within passes.
func eventually(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	uiEventually(ctx, t, what, f)
}

func (r *convRig) orderStatus(t *testing.T, m events.OrderCreateRequested) state.Order {
	t.Helper()
	var st state.Order
	if err := r.conns.Pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE reservation_id = $1`, m.ReservationID).Scan(&st); err != nil {
		t.Fatalf("order of %s: %v", m.ReservationID, err)
	}
	return st
}

func (r *convRig) reconciler(t *testing.T) *reconcile.Reconciler {
	t.Helper()
	rec, err := reconcile.New(r.conns.Pool, r.conns.Redis, testenv.Stores(t, r.conns.Pool, r.conns.Redis, r.conns.Provider),
		metrics.NewReconcile(prometheus.NewRegistry()), logger(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sagas, err := sagastarter.NewControl(r.tc, r.cfg.TemporalTaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	rec.SetSagas(sagas)
	return rec
}

// A saga waiting for payment is terminated by mistake. Its order would stay
// open with its unit held forever: reconciliation finds the open order past
// its payment deadline with no saga running and resumes the saga, which runs
// the cancel protocol (provider first) and gives the unit back. The buyer's
// own cancel of an order whose saga is gone resumes it too (no 503).
func TestLostSagaIsResumedAndCancels(t *testing.T) {
	r := newConvRig(t, 900*time.Second)
	ctx := context.Background()
	m, run := r.saga(t, 1)
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	if err := r.tc.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "by mistake"); err != nil {
		t.Fatal(err)
	}
	// Its payment deadline passes.
	if _, err := r.conns.Pool.Exec(ctx, `UPDATE orders SET expires_at = clock_timestamp() - interval '1 minute' WHERE reservation_id = $1`, m.ReservationID); err != nil {
		t.Fatal(err)
	}
	rep, err := r.reconciler(t).Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	var lost *reconcile.Anomaly
	for i, a := range rep.Anomalies {
		if a.Type == reconcile.LostSaga {
			lost = &rep.Anomalies[i]
		}
	}
	if lost == nil || lost.Action != reconcile.ActionRepaired {
		t.Fatalf("lost saga not repaired: %+v", rep.Anomalies)
	}
	eventually(t, time.Minute, "the resumed saga cancels the order", func() error {
		if st := r.orderStatus(t, m); st != state.OrderCancelled {
			return fmt.Errorf("order is %s", st)
		}
		if st := r.conns.Redis.HGet(ctx, r.k.Reservation(m.ReservationID.String()), "status").Val(); st != "CANCELLED" {
			return fmt.Errorf("redis reservation is %s", st)
		}
		return nil
	})
	if c := r.conns.Redis.HGetAll(ctx, r.k.Counter()).Val(); c["available"] != "10" || c["committed"] != "0" {
		t.Fatalf("redis counters after the cancel: %v", c)
	}

	// The buyer cancels an order whose saga is gone.
	m2, run2 := r.saga(t, 2)
	r.state(t, m2, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	if err := r.tc.TerminateWorkflow(ctx, run2.GetID(), run2.GetRunID(), "by mistake"); err != nil {
		t.Fatal(err)
	}
	svc, err := checkout.NewService(r.conns.Pool, r.conns.Provider, r.sagas(t),
		func(string, string, string, []byte, time.Time) error { return nil }, "http://127.0.0.1:1/cb", logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.RequestCancel(ctx, 2, orders.ID(m2.ReservationID), "changed my mind"); err != nil {
		t.Fatalf("buyer's cancel of an order whose saga is gone: %v", err)
	}
	eventually(t, time.Minute, "the buyer's cancel completes", func() error {
		if st := r.orderStatus(t, m2); st != state.OrderCancelled {
			return fmt.Errorf("order is %s", st)
		}
		return nil
	})
}

// An operator's repair whose ApplyRepair committed but whose answer was lost
// (the worker died before reporting) is retried by Temporal: the retry gets
// the recorded decision and the saga carries it out, instead of staying in
// MANUAL_REVIEW refusing every later repair.
func TestRetriedRepairIsCarriedOut(t *testing.T) {
	r := newConvRig(t, 900*time.Second)
	ctx := context.Background()
	// PostgreSQL has no stock (rejected) and Redis loses the reservation before
	// the compensation: the saga waits in MANUAL_REVIEW.
	m, _ := r.saga(t, 3, func(m events.OrderCreateRequested) {
		if _, err := r.conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = 0, available_stock = 0 WHERE activity_id = $1`, r.k.ActivityID); err != nil {
			t.Fatal(err)
		}
		r.conns.Redis.Del(ctx, r.k.Reservation(m.ReservationID.String()))
	})
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaManual })
	testenv.RequireFailpoints(t)
	r.fp.Arm(failpoint.AfterRepairCommit, 1)
	if err := r.tc.SignalWorkflow(ctx, workflows.ReservationWorkflowID(m.ReservationID.String()), "", workflows.SignalRepair,
		steps.RepairRequest{Action: steps.RepairMarkResolved, RepairID: "INC-7-" + m.ReservationID.String()[:8],
			Operator: "ops", Reason: "settled with the customer, INC-7"}); err != nil {
		t.Fatal(err)
	}
	final := r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaResolved })
	if err := r.fp.Check(failpoint.AfterRepairCommit); err != nil {
		t.Fatal("the failpoint never fired: the test did not retry a committed repair")
	}
	if len(final.Repairs) != 1 || !final.Repairs[0].Accepted || !final.Repairs[0].Duplicate {
		t.Fatalf("repairs = %+v, want the one repair, accepted, answered from its record", final.Repairs)
	}
}

// A repair signal whose action does not fit its audit column used to fail
// its activity for ever (retried, silently) and block the saga, expiry
// cancel included. It is refused and recorded, and the order still expires
// and is cancelled on time.
func TestInvalidRepairDoesNotBlockExpiry(t *testing.T) {
	r := newConvRig(t, 4*time.Second)
	ctx := context.Background()
	m, _ := r.saga(t, 4)
	r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaOrderCreated })
	long := strings.Repeat("force-cancel-unpaid-", 6)
	if err := r.tc.SignalWorkflow(ctx, workflows.ReservationWorkflowID(m.ReservationID.String()), "", workflows.SignalRepair,
		steps.RepairRequest{Action: long, RepairID: "bad-" + m.ReservationID.String()[:8], Operator: "ops", Reason: "typo"}); err != nil {
		t.Fatal(err)
	}
	final := r.state(t, m, time.Minute, func(s workflows.SagaState) bool { return s.Status == state.SagaCancelled })
	if len(final.Repairs) != 1 || final.Repairs[0].Accepted {
		t.Fatalf("repairs = %+v, want one refused", final.Repairs)
	}
	var status string
	if err := r.conns.Pool.QueryRow(ctx, `SELECT status FROM repair_task WHERE repair_id = $1`, "bad-"+m.ReservationID.String()[:8]).Scan(&status); err != nil || status != "REFUSED" {
		t.Fatalf("repair_task = %q, %v; want REFUSED", status, err)
	}
}

// sagas is what the API asks of the sagas, over the rig's Temporal client.
func (r *convRig) sagas(t *testing.T) *workflows.Sagas {
	t.Helper()
	s, err := workflows.NewSagas(r.tc, r.cfg.TemporalTaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
