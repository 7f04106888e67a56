package bench

// Leg (d) of `seckill-dev bench order`: the baseline of leg (c). The same number
// of a plain Temporal workflow of the saga's forward shape, on the same dev
// server in the same run, on a task queue of its own with its own worker in
// this process: one activity with one PostgreSQL INSERT (one commit), one
// activity with one Redis write (the projection's place), then a wait for a
// "payment" signal or the payment timer. No search attributes, no query
// handler, no inbox row: what any Temporal workflow of this shape costs.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/internal/platform/temporalx"
)

// Names the plain workflow and its activities are registered under (on the
// bench's own worker only).
const (
	plainWorkflowName = "SeckillBenchPlainWorkflow"
	plainCreateName   = "SeckillBenchPlainCreate"
	plainProjectName  = "SeckillBenchPlainProject"
	plainSignal       = "payment"
)

// PlainInput starts one plain workflow.
type PlainInput struct {
	ID            uuid.UUID
	PaymentWaitMS int64 // the timer the workflow waits on (the saga's payment timeout)
}

// PlainWorkflow is the plain workflow: create, project, wait for payment or
// the timer, with the saga's activity options.
func PlainWorkflow(ctx workflow.Context, in PlainInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 20 * time.Second},
	})
	if err := workflow.ExecuteActivity(ctx, plainCreateName, in.ID).Get(ctx, nil); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(ctx, plainProjectName, in.ID).Get(ctx, nil); err != nil {
		return err
	}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(workflow.GetSignalChannel(ctx, plainSignal), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
	})
	sel.AddFuture(workflow.NewTimer(ctx, time.Duration(in.PaymentWaitMS)*time.Millisecond), func(workflow.Future) {})
	sel.Select(ctx)
	return nil
}

// plainActivities are the plain workflow's two activities.
type plainActivities struct {
	pool *pgxpool.Pool
	rdb  redis.UniversalClient
	key  string // the Redis set the projection adds to
}

// Create inserts one row (one commit).
func (a *plainActivities) Create(ctx context.Context, id uuid.UUID) error {
	_, err := a.pool.Exec(ctx, `INSERT INTO bench_plain_order (id) VALUES ($1) ON CONFLICT DO NOTHING`, id)
	return err
}

// Project records the row in Redis (one command).
func (a *plainActivities) Project(ctx context.Context, id uuid.UUID) error {
	return a.rdb.SAdd(ctx, a.key, id.String()).Err()
}

// plainLeg is leg (d): o.Sagas plain workflows started from --starters
// goroutines, until every row is inserted and projected.
func (e *orderEnv) plainLeg(ctx context.Context) error {
	n := e.o.Sagas
	tq := "seckill-bench-plain-" + e.runID
	acts := &plainActivities{pool: e.conns.Pool, rdb: e.rdb, key: "seckill:bench:plain:" + e.runID}
	if _, err := e.conns.Pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_plain_order (id uuid PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	defer e.rdb.Del(context.WithoutCancel(ctx), acts.key)
	// The saga worker's settings (workers/sagaworker), on a queue of its own.
	w, err := temporalx.NewWorker(e.conns.Temporal, tq, worker.Options{
		MaxConcurrentActivityExecutionSize: int(e.cfg.PGMaxConns), MaxConcurrentWorkflowTaskExecutionSize: 64,
	}, temporalx.InterceptorOptions{Registerer: prometheus.NewRegistry(), Logger: e.quiet})
	if err != nil {
		return err
	}
	w.RegisterWorkflowWithOptions(PlainWorkflow, workflow.RegisterOptions{Name: plainWorkflowName})
	w.RegisterActivityWithOptions(acts.Create, activity.RegisterOptions{Name: plainCreateName})
	w.RegisterActivityWithOptions(acts.Project, activity.RegisterOptions{Name: plainProjectName})
	if err := w.Start(); err != nil {
		return fmt.Errorf("(d) plain: start worker: %w", err)
	}
	defer w.Stop()
	var ids []string
	var mu sync.Mutex
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		ok, failed, took := e.deleteWorkflows(ctx, ids, "(d) plain")
		if leg := e.report.Plain; leg != nil {
			leg.TerminateS, leg.Terminated = took.Seconds(), int(ok)
		}
		if failed > 0 {
			e.report.Notes = append(e.report.Notes, fmt.Sprintf("%d plain workflows could not be deleted: their timers end them", failed))
		}
	}()
	time.Sleep(2 * time.Second) // let the worker's pollers come up; not part of the drain

	leg := &SagaLeg{Sagas: n, Starters: e.o.Starters}
	e.report.Plain = leg
	e.progress("(d) plain: starting %d plain workflows on task queue %s from %d goroutines", n, tq, e.o.Starters)
	win := StartCPUWindow()
	t0 := time.Now()
	starts := e.startPlain(ctx, tq, n, t0, func(id string) { mu.Lock(); ids = append(ids, id); mu.Unlock() })
	d, err := e.awaitPlain(ctx, acts.key, n, starts, t0)
	if err != nil {
		leg.Outcome = err.Error()
		return err
	}
	<-starts.done
	leg.DrainS, leg.CreatedS = time.Since(t0).Seconds(), d.createdAt.Seconds()
	leg.CPU = win.Stop(int64(n), e.ncpu, benchSelf, nil, orderSagaPath)
	leg.StartS = time.Duration(starts.elapsed.Load()).Seconds()
	leg.StartsPS, leg.SagasPS = float64(n)/leg.StartS, float64(n)/leg.DrainS
	leg.Milestones, leg.SteadyPS = Milestones(d.at, d.done, int64(n))
	leg.Outcome = fmt.Sprintf("%d plain workflows started in %.1f s; all %d rows inserted after %.1f s and projected after %.1f s; milestones %s",
		starts.started.Load(), leg.StartS, n, leg.CreatedS, leg.DrainS, milestoneText(leg.Milestones))
	e.progress("(d) plain: drained %d in %.1f s: %.1f workflows/s (steady %.1f/s)", n, leg.DrainS, leg.SagasPS, leg.SteadyPS)
	return nil
}

// startPlain starts n plain workflows from --starters goroutines.
func (e *orderEnv) startPlain(ctx context.Context, tq string, n int, t0 time.Time, started func(string)) *sagaStarts {
	wait := time.Duration(orderActivity(e.o, t0).PaymentTimeoutSeconds) * time.Second
	return e.startAll(ctx, n, t0, func(i int) (string, error) {
		id := fmt.Sprintf("seckill-bench-plain-%s-%d", e.runID, i)
		_, err := e.conns.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: tq},
			plainWorkflowName, PlainInput{ID: uuid.New(), PaymentWaitMS: wait.Milliseconds()})
		return id, err
	}, started)
}

// awaitPlain polls PostgreSQL and Redis until every row is inserted and
// projected; it fails on failed starts, a stall or the timeout.
func (e *orderEnv) awaitPlain(ctx context.Context, key string, n int, starts *sagaStarts, t0 time.Time) (sagaDrain, error) {
	var d sagaDrain
	lastChange, lastProgress, last := time.Now(), time.Now(), int64(-1)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("(d) plain: stopped by the timeout: %d of %d done", last, n)
		case <-tick.C:
		}
		var rows int64
		if err := e.conns.Pool.QueryRow(ctx, `SELECT count(*) FROM bench_plain_order`).Scan(&rows); err != nil {
			return d, err
		}
		projected, err := e.rdb.SCard(ctx, key).Result()
		if err != nil {
			return d, err
		}
		el := time.Since(t0)
		d.at, d.done, d.projected = append(d.at, el.Seconds()), append(d.done, rows), projected
		if rows == int64(n) && d.createdAt == 0 {
			d.createdAt = el
		}
		if f := starts.failed.Load(); f > 0 {
			return d, fmt.Errorf("(d) plain: %d starts failed, e.g. %v", f, starts.sample.Load())
		}
		if rows == int64(n) && projected == int64(n) {
			return d, nil
		}
		if rows != last {
			last, lastChange = rows, time.Now()
		} else if time.Since(lastChange) > orderStall {
			return d, fmt.Errorf("(d) plain: no row inserted for %s: %d of %d", orderStall, rows, n)
		}
		if time.Since(lastProgress) >= 5*time.Second {
			e.progress("(d) plain: t=%.0fs started %d, rows %d, projected %d of %d", el.Seconds(), starts.started.Load(), rows, projected, n)
			lastProgress = time.Now()
		}
	}
}

// deleteWorkflows deletes (else terminates) the workflows wids from a
// bounded pool, even after a failure or the timeout: the count deleted, the
// count that failed and how long it took.
func (e *orderEnv) deleteWorkflows(ctx context.Context, wids []string, label string) (ok, failed int64, took time.Duration) {
	if len(wids) == 0 {
		return 0, 0, 0
	}
	tctx, c := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer c()
	e.progress("%s: deleting (terminating) %d workflows", label, len(wids))
	t0 := time.Now()
	var next, okN, failedN atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(wids) {
					return
				}
				if err := e.deleteWorkflow(tctx, wids[i]); err == nil || isNotFound(err) {
					okN.Add(1)
				} else {
					failedN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took = time.Since(t0)
	e.progress("%s: deleted %d in %.1f s (%d failed)", label, okN.Load(), took.Seconds(), failedN.Load())
	return okN.Load(), failedN.Load(), took
}
