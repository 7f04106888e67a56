package sagaworker

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// Run runs the Temporal worker of the sagas, refunds and reconciliation
// until ctx ends (part "saga").
func Run(ctx context.Context, d workers.Deps) error {
	if d.Temporal == nil {
		return errors.New("sagaworker: needs a Temporal client")
	}
	cfg := d.Config
	acts, err := activities.New(activities.Deps{Pool: d.Pool, Verify: d.Verify, Redis: d.Redis, Failpoints: d.Failpoints,
		Log: d.Log, Topic: cfg.TopicOrderCreate, TerminalTTL: cfg.ReservationTTL, Provider: d.Provider, Metrics: d.Saga})
	if err != nil {
		return err
	}
	rec, err := reconciliation(d)
	if err != nil {
		return err
	}
	version, versioned := Version(cfg)
	var dep worker.DeploymentOptions
	if versioned {
		dep = temporalx.Versioned(version)
	}
	logVersion(d, version, versioned)
	wc := d.Temporal
	if versioned && d.SagaWorker != nil {
		wc = d.SagaWorker
	}
	w, err := New(wc, cfg.TemporalTaskQueue, acts, rec, int(cfg.PGMaxConns),
		temporalx.InterceptorOptions{Registerer: d.Registry, AttemptsAlert: cfg.ActivityAttemptsAlert, Logger: d.Log}, dep)
	if err != nil {
		return err
	}
	bulk, err := activities.NewBulkRepair(d.Pool, d.Temporal, func(ctx context.Context, m events.OrderCreateRequested, req steps.RepairRequest) error {
		return workflows.RepairSaga(ctx, d.Temporal, cfg.TemporalTaskQueue, m, req)
	})
	if err != nil {
		return err
	}
	RegisterBulkRepair(w, bulk)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start temporal worker: %w", err)
	}
	defer w.Stop()
	if versioned && cfg.WorkerSetCurrent == config.SetCurrentAuto {
		if err := promote(ctx, d, version); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// reconciliation builds the Reconcile activity: a reconciler on the stores
// the saga's activities use, resuming lost sagas through Temporal.
func reconciliation(d workers.Deps) (*activities.Reconciliation, error) {
	inv, err := inventory.NewStore(inventory.Deps{Pool: d.Pool, Redis: d.Redis, Failpoints: d.Failpoints, Log: d.Log,
		Metrics: d.Saga, TerminalTTL: d.Config.ReservationTTL})
	if err != nil {
		return nil, err
	}
	stores := reconcile.Stores{Inventory: inv, Payments: payments.NewStore(d.Pool, d.Failpoints), Provider: d.Provider}
	rec, err := reconcile.New(d.Pool, d.Redis, stores, d.Reconcile, d.Log, d.Config.ReconcileWatermark)
	if err != nil {
		return nil, err
	}
	sagas, err := sagastarter.NewControl(d.Temporal, d.Config.TemporalTaskQueue)
	if err != nil {
		return nil, err
	}
	rec.SetSagas(sagas)
	return activities.NewReconciliation(rec)
}
