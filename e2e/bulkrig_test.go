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
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workflows"
)

// bulkRig is a saga worker on a fresh database and task queue, and a sale
// for bulk repairs: admitted buyers in Redis, stock units in PostgreSQL
// (the sagas past them find none and, with their Redis hash gone, wait in
// MANUAL_REVIEW).
type bulkRig struct {
	cfg    config.Config
	conns  *app.Conns
	k      lua.Keys
	msgs   []events.OrderCreateRequested
	ofSale string
}

func newBulkRig(t *testing.T, admitted, stock int) *bulkRig {
	t.Helper()
	cfg := e2eConfig(t)
	ctx := context.Background()
	conns, err := app.Open(ctx, cfg, "seckill-e2e-bulk", true, logger(), nil)
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
	r := &bulkRig{cfg: cfg, conns: conns}
	r.k, r.msgs = bulkSale(ctx, t, cfg, conns, admitted)
	r.ofSale = fmt.Sprintf("ActivityId = %d", r.k.ActivityID)
	if _, err := conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = $2, available_stock = $2 WHERE activity_id = $1 AND sku_id = 1`,
		r.k.ActivityID, stock); err != nil {
		t.Fatal(err)
	}
	return r
}

// start starts the sagas of ms (terminated when the test ends).
func (r *bulkRig) start(t *testing.T, ms []events.OrderCreateRequested) {
	t.Helper()
	for _, m := range ms {
		if _, err := r.conns.Temporal.ExecuteWorkflow(context.Background(), workflows.SagaStartOptions(r.cfg.TemporalTaskQueue, m),
			workflows.ReservationSaga, workflows.SagaInput{Message: m, LocalForward: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = r.conns.Temporal.TerminateWorkflow(context.Background(), workflows.ReservationWorkflowID(m.ReservationID.String()), "", "e2e cleanup")
		})
	}
}

// stuck starts the sagas of ms after their Redis hash is gone: each waits in
// MANUAL_REVIEW (no order, nothing to give back).
func (r *bulkRig) stuck(t *testing.T, ms []events.OrderCreateRequested) {
	t.Helper()
	for _, m := range ms {
		r.conns.Redis.Del(context.Background(), r.k.Reservation(m.ReservationID.String()))
	}
	r.start(t, ms)
}

// visible waits until the visibility query counts want sagas of the sale.
func (r *bulkRig) visible(t *testing.T, status string, want int64) {
	t.Helper()
	query := fmt.Sprintf(`%s AND ReservationStatus = %q`, r.ofSale, status)
	eventually(t, 2*time.Minute, fmt.Sprintf("%d sagas for %s", want, query), func() error {
		n, err := r.conns.Temporal.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return err
		}
		if n.GetCount() != want {
			return fmt.Errorf("%d", n.GetCount())
		}
		return nil
	})
}
