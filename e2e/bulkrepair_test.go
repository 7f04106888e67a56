package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workflows"
)

// A Redis failover lost the reservation hashes of a few hundred admitted
// buyers: every saga waits in MANUAL_REVIEW. One bulk repair resolves them
// all (after a dry run that changes nothing), refuses the sagas its action
// does not fit, and run again does nothing twice.
func TestBulkRepairResolvesStuckSagas(t *testing.T) {
	const stuck, open = 200, 5
	cfg := e2eConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	conns, err := app.Open(ctx, cfg, "seckill-e2e-bulkrepair", true, logger(), nil)
	if err != nil {
		t.Fatalf("connect to the stack: %v", err)
	}
	t.Cleanup(conns.Close)
	wctx, stopWorker := context.WithCancel(context.Background())
	werr := make(chan error, 1)
	go func() {
		werr <- app.RunWorkers(wctx, cfg, conns, []string{app.PartSaga}, app.NewTelemetry(), nil, logger())
	}()
	t.Cleanup(func() {
		stopWorker()
		if err := <-werr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("saga worker: %v", err)
		}
	})

	k, msgs := bulkSale(ctx, t, cfg, conns, open+stuck)
	// The first sagas get orders (PostgreSQL holds `open` units) and wait for payment.
	start := func(ms []events.OrderCreateRequested) {
		for _, m := range ms {
			if _, err := conns.Temporal.ExecuteWorkflow(ctx, workflows.SagaStartOptions(cfg.TemporalTaskQueue, m), workflows.ReservationSaga,
				workflows.SagaInput{Message: m, LocalForward: true}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = conns.Temporal.TerminateWorkflow(context.Background(), workflows.ReservationWorkflowID(m.ReservationID.String()), "", "e2e cleanup")
			})
		}
	}
	start(msgs[:open])
	visible := func(query string, want int64) {
		t.Helper()
		eventually(t, 2*time.Minute, fmt.Sprintf("%d sagas for %s", want, query), func() error {
			n, err := conns.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
			if err != nil {
				return err
			}
			if n.GetCount() != want {
				return fmt.Errorf("%d", n.GetCount())
			}
			return nil
		})
	}
	ofSale := fmt.Sprintf("ActivityId = %d", k.ActivityID)
	visible(ofSale+` AND ReservationStatus = "ORDER_CREATED"`, open)
	// The rest lose their Redis hash before their saga runs: no order, nothing to give back.
	for _, m := range msgs[open:] {
		conns.Redis.Del(ctx, k.Reservation(m.ReservationID.String()))
	}
	start(msgs[open:])
	visible(ofSale+` AND ReservationStatus = "MANUAL_REVIEW"`, stuck)

	in := workflows.BulkRepairInput{Query: ofSale, Action: "mark-resolved", Operator: "alice", Reason: "INC-7: refunded by hand",
		PerSecond: 1000, Limit: 1000}
	rep := runBulk(ctx, t, conns, cfg.TemporalTaskQueue, in, true)
	if rep.Listed != open+stuck || rep.Would != stuck || rep.Refused != open || rep.Applied != 0 || bulkRepairs(ctx, t, conns, k) != 0 {
		t.Fatalf("dry run: %+v, %d repairs recorded; want %d would apply, %d refused, nothing recorded", summary(rep), bulkRepairs(ctx, t, conns, k), stuck, open)
	}
	rep = runBulk(ctx, t, conns, cfg.TemporalTaskQueue, in, false)
	if rep.Applied != stuck || rep.Refused != open {
		t.Fatalf("bulk repair: %+v, want %d applied, %d refused", summary(rep), stuck, open)
	}
	visible(ofSale+` AND ReservationStatus = "RESOLVED_MANUALLY"`, stuck)
	if n := bulkRepairs(ctx, t, conns, k); n != stuck {
		t.Fatalf("%d repairs recorded, want %d", n, stuck)
	}
	// Again: the resolved sagas are done, the open ones still refused; nothing twice.
	rep = runBulk(ctx, t, conns, cfg.TemporalTaskQueue, in, false)
	if rep.Applied != 0 || rep.Refused != open || bulkRepairs(ctx, t, conns, k) != stuck {
		t.Fatalf("second bulk repair: %+v, %d repairs recorded", summary(rep), bulkRepairs(ctx, t, conns, k))
	}
	// Bad input is refused before anything starts.
	for _, bad := range []workflows.BulkRepairInput{{Query: ofSale, Action: "delete-everything", Operator: "a", Reason: "r", PerSecond: 1, Limit: 1},
		{Query: "ActivityId ==== 1", Action: "mark-resolved", Operator: "a", Reason: "r", PerSecond: 1, Limit: 1}} {
		if _, err := app.StartBulkRepair(ctx, conns.Temporal, cfg.TemporalTaskQueue, bad); err == nil {
			t.Errorf("bulk repair %+v started", bad)
		}
	}
}

func runBulk(ctx context.Context, t *testing.T, conns *app.Conns, taskQueue string, in workflows.BulkRepairInput, dry bool) workflows.BulkRepairReport {
	t.Helper()
	in.DryRun = dry
	run, err := app.StartBulkRepair(ctx, conns.Temporal, taskQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	var rep workflows.BulkRepairReport
	if err := run.Get(ctx, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func bulkRepairs(ctx context.Context, t *testing.T, conns *app.Conns, k lua.Keys) int {
	t.Helper()
	var n int
	if err := conns.Pool.QueryRow(ctx, `SELECT count(*) FROM repair_task WHERE rule_name = 'MANUAL:mark-resolved' AND status = 'APPLIED'
		AND object_id IN (SELECT reservation_id::text FROM inventory_reservation WHERE activity_id = $1)`, k.ActivityID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// bulkSale sets up a sale whose PostgreSQL stock is 5 and admits n buyers in
// Redis; no send-due scanner sends their messages (the test starts the sagas).
func bulkSale(ctx context.Context, t *testing.T, cfg config.Config, conns *app.Conns, n int) (lua.Keys, []events.OrderCreateRequested) {
	t.Helper()
	now := time.Now()
	def := sale.Activity{ActivityID: testenv.ActivityID(), Name: "e2e bulk repair", StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300,
		SKUs: []sale.SKU{{SKUID: 1, Stock: int64(n), PriceCents: 100}}}
	k := lua.Keys{ActivityID: def.ActivityID, SKUID: 1}
	t.Cleanup(func() {
		bg := context.Background()
		conns.Redis.SRem(bg, lua.ActiveSKUs, fmt.Sprintf("%d:1", k.ActivityID))
		testenv.DeleteSKUKeys(bg, conns.Redis, k)
	})
	if _, err := sale.Setup(ctx, conns.Pool, conns.Redis, def); err != nil {
		t.Fatal(err)
	}
	conns.Redis.SRem(ctx, lua.ActiveSKUs, fmt.Sprintf("%d:1", k.ActivityID))
	if _, err := conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = 5, available_stock = 5 WHERE activity_id = $1 AND sku_id = 1`,
		k.ActivityID); err != nil {
		t.Fatal(err)
	}
	d, err := app.Deriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]events.OrderCreateRequested, n)
	for i := range msgs {
		msgs[i] = testenv.MustReserve(t, conns.Redis, d, k, int64(i+1))
	}
	conns.Redis.Del(ctx, k.SendDue())
	return k, msgs
}

func summary(r workflows.BulkRepairReport) string {
	return fmt.Sprintf("listed %d applied %d would %d refused %d skipped %d %v", r.Listed, r.Applied, r.Would, r.Refused, r.Skipped, r.RefusedByReason)
}
