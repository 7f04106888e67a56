package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// reserveBacklog admits leg (c)'s reservations through lua/reserve.lua, as
// the gateway does, so that the sagas' Redis projection has its hashes.
func (e *orderEnv) reserveBacklog(ctx context.Context) error {
	d, err := app.Deriver(e.cfg)
	if err != nil {
		return err
	}
	k := lua.Keys{ActivityID: e.activity, SKUID: orderSKUSagas}
	n := e.o.Sagas
	e.backlog = make([]reservation.Fields, n)
	e.progress("(c) sagas: reserving the backlog of %d in Redis (lua/reserve.lua)", n)
	t0 := time.Now()
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				user := int64(i + 1)
				req := uuid.New()
				id, err := d.ForRequest(0, e.activity, orderSKUSagas, user, req)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				nowMS := time.Now().UnixMilli()
				res, err := lua.Reserve(ctx, e.rdb, k, lua.ReserveArgs{ReservationID: id.ReservationID.String(),
					MessageID: id.MessageID.String(), RequestID: req.String(), UserID: user, NowMS: nowMS,
					KeyVersion: id.KeyVersion, SchemaVersion: ids.SchemaVersion, TTL: benchTTL,
					SendDueAtMS: nowMS + 24*time.Hour.Milliseconds()})
				if err == nil && res.Code != lua.ReserveAdmitted {
					err = fmt.Errorf("reserve user %d: %+v", user, res)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				e.backlog[i] = reservation.Fields{ReservationID: id.ReservationID, MessageID: id.MessageID, RequestID: req,
					ActivityID: e.activity, SKUID: orderSKUSagas, UserID: user, SchemaVersion: ids.SchemaVersion,
					KeyVersion: id.KeyVersion, ReservedAtMS: nowMS, DeadlineMS: res.DeadlineMS}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("reserve backlog: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.report.Sagas = &SagaLeg{Sagas: n, Starters: e.o.Starters, ReserveS: time.Since(t0).Seconds()}
	return nil
}

// sagaLeg is leg (c).
func (e *orderEnv) sagaLeg(ctx context.Context) error {
	leg := e.report.Sagas
	n := len(e.backlog)
	deriver, err := app.Deriver(e.cfg)
	if err != nil {
		return err
	}
	st, err := sagastarter.New(e.conns.Pool, e.conns.Temporal, e.cfg.TemporalTaskQueue, deriver, prometheus.NewRegistry(), e.quiet)
	if err != nil {
		return err
	}
	bodies := make([][]byte, n)
	for i, f := range e.backlog {
		if bodies[i], err = json.Marshal(f.Message()); err != nil {
			return err
		}
	}
	werr, stopWorker := e.startSagaWorker(ctx)
	defer stopWorker()
	// Terminate the sagas that were started: they wait for payment.
	defer e.terminateSagas(ctx)
	select { // let the worker's pollers come up; not part of the drain
	case err := <-werr:
		return fmt.Errorf("saga worker: %w", err)
	case <-time.After(2 * time.Second):
	}

	e.progress("(c) sagas: starting %d sagas on task queue %s from %d goroutines (saga starter code)", n, e.cfg.TemporalTaskQueue, e.o.Starters)
	calls0 := temporalRequests(e.tel)
	w := StartCPUWindow()
	t0 := time.Now()
	starts := e.startSagas(ctx, st, bodies, t0)
	d, err := e.awaitDrain(ctx, leg, starts, werr, t0)
	if err != nil {
		return err
	}
	drain := time.Since(t0)
	<-starts.done
	leg.CPU = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderSagaPath)
	leg.StartS = time.Duration(starts.elapsed.Load()).Seconds()
	leg.StartsPS = float64(n) / leg.StartS
	leg.CreatedS, leg.DrainS = d.createdAt.Seconds(), drain.Seconds()
	leg.SagasPS = float64(n) / leg.DrainS
	leg.Milestones, leg.SteadyPS = Milestones(d.at, d.done, int64(n))
	leg.Outcome = fmt.Sprintf("%d reserved in Redis in %.1f s (not timed); %d sagas started in %.1f s; all %d orders created after %.1f s and projected (committed %d, open_reserved 0) after %.1f s; milestones %s",
		n, leg.ReserveS, starts.started.Load(), leg.StartS, n, leg.CreatedS, d.projected, leg.DrainS, milestoneText(leg.Milestones))
	e.progress("(c) sagas: drained %d in %.1f s: %.1f sagas/s (steady %.1f/s), starts %.0f/s", n, leg.DrainS, leg.SagasPS, leg.SteadyPS, leg.StartsPS)
	open, err := e.rdb.HGet(ctx, lua.Keys{ActivityID: e.activity, SKUID: orderSKUSagas}.Counter(), "open_reserved").Int64()
	if err != nil {
		return err
	}
	if open != 0 {
		return fmt.Errorf("(c) sagas: Redis open_reserved is %d after the drain, want 0", open)
	}
	leg.Requests = (temporalRequests(e.tel) - calls0) / float64(n)
	if leg.History, err = e.historyShape(ctx); err != nil {
		return fmt.Errorf("(c) sagas: %w", err)
	}
	h := leg.History
	e.progress("(c) sagas: per saga: %.1f requests to the Temporal frontend; (%d sampled) %.1f history events, %.1f workflow tasks, %.1f activities, %.1f markers, %.1f search attribute upserts",
		leg.Requests, h.Sampled, h.Events, h.WorkflowTasks, h.Activities, h.Markers, h.Upserts)
	return nil
}

// startSagaWorker runs the saga worker, composed like `seckill worker
// --parts saga`, until the returned function stops it.
func (e *orderEnv) startSagaWorker(ctx context.Context) (<-chan error, func()) {
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	werr := make(chan error, 1)
	go func() {
		werr <- app.RunWorkers(wctx, e.cfg, e.conns, []string{app.PartSaga}, e.tel, &failpoint.Set{}, e.quiet)
	}()
	return werr, func() {
		stopWorker()
		select {
		case <-werr:
		case <-time.After(30 * time.Second):
			e.progress("(c) sagas: worker did not stop within 30 s")
		}
	}
}

// sagaStarts counts the saga starts of --starters goroutines.
type sagaStarts struct {
	next, started, failed atomic.Int64
	sample                atomic.Value
	elapsed               atomic.Int64 // time.Duration of all starts
	done                  chan struct{}
}

// startAll runs start(i) for every i below n from --starters goroutines,
// counting the starts and the failures; started gets each started
// workflow's id.
func (e *orderEnv) startAll(ctx context.Context, n int, t0 time.Time, start func(int) (string, error), started func(string)) *sagaStarts {
	s := &sagaStarts{done: make(chan struct{})}
	var wg sync.WaitGroup
	for range e.o.Starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(s.next.Add(1) - 1)
				if i >= n {
					return
				}
				id, err := start(i)
				if err != nil {
					s.failed.Add(1)
					s.sample.Store(err.Error())
					continue
				}
				s.started.Add(1)
				started(id)
			}
		}()
	}
	go func() {
		wg.Wait()
		s.elapsed.Store(int64(time.Since(t0)))
		close(s.done)
	}()
	return s
}

// startSagas starts the backlog's sagas with the saga starter's code
// (inbox row + ExecuteWorkflow), retrying as a broker would redeliver.
func (e *orderEnv) startSagas(ctx context.Context, st *sagastarter.Starter, bodies [][]byte, t0 time.Time) *sagaStarts {
	return e.startAll(ctx, len(e.backlog), t0, func(i int) (string, error) {
		f := e.backlog[i]
		d := mq.Delivered{Topic: Topic, Key: f.ReservationID.String(), Tag: "ORDER_CREATE_REQUESTED",
			ID: f.MessageID.String(), Body: bodies[i], BrokerMsgID: "bench-" + f.MessageID.String()}
		var err error
		for attempt := 0; attempt < 5; attempt++ { // a redelivery, as the broker would
			if err = st.Handle(ctx, d); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		return workflows.ReservationWorkflowID(f.ReservationID.String()), err
	}, func(id string) {
		e.mu.Lock()
		e.startedIDs = append(e.startedIDs, id)
		e.mu.Unlock()
	})
}

// sagaDrain is the progress of the drain: samples of orders created over
// time, when all were created, and the Redis projection.
type sagaDrain struct {
	at        []float64
	done      []int64
	createdAt time.Duration
	projected int64
}

// awaitDrain polls PostgreSQL and Redis until every order is created and
// projected; it fails on a failed start, another final status, a stall,
// the timeout or the worker's end.
func (e *orderEnv) awaitDrain(ctx context.Context, leg *SagaLeg, starts *sagaStarts, werr <-chan error, t0 time.Time) (sagaDrain, error) {
	n := len(e.backlog)
	k := lua.Keys{ActivityID: e.activity, SKUID: orderSKUSagas}
	var d sagaDrain
	var created, other int64
	lastProgress, lastChange, lastCreated := time.Now(), time.Now(), int64(-1)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			leg.Outcome = fmt.Sprintf("stopped by the timeout: %d of %d orders created, %d projected", created, n, d.projected)
			return d, fmt.Errorf("(c) sagas: %s", leg.Outcome)
		case err := <-werr:
			return d, fmt.Errorf("(c) sagas: worker stopped: %v", err)
		case <-tick.C:
		}
		var err error
		created, other, err = e.reservationCounts(ctx)
		if err != nil {
			return d, err
		}
		vals, err := e.rdb.HMGet(ctx, k.Counter(), "committed").Result()
		if err != nil {
			return d, err
		}
		d.projected = toInt64(vals[0])
		el := time.Since(t0)
		d.at, d.done = append(d.at, el.Seconds()), append(d.done, created)
		if created == int64(n) && d.createdAt == 0 {
			d.createdAt = el
		}
		if created != lastCreated {
			lastCreated, lastChange = created, time.Now()
		}
		if err := startFailure(leg, starts, n); err != nil {
			return d, err
		}
		if created == int64(n) && d.projected >= int64(n) {
			return d, nil
		}
		if other > 0 {
			leg.Outcome = fmt.Sprintf("%d reservations ended in another status than ORDER_CREATED", other)
			return d, fmt.Errorf("(c) sagas: %s (see inventory_reservation in %s)", leg.Outcome, e.report.Database)
		}
		if time.Since(lastChange) > orderStall {
			leg.Outcome = fmt.Sprintf("no order created for %s: %d of %d created, %d started", orderStall, created, n, starts.started.Load())
			return d, fmt.Errorf("(c) sagas: %s", leg.Outcome)
		}
		if time.Since(lastProgress) >= 5*time.Second {
			e.progress("(c) sagas: t=%.0fs started %d, orders created %d, projected %d of %d", el.Seconds(), starts.started.Load(), created, d.projected, n)
			lastProgress = time.Now()
		}
	}
}

// startFailure fails the drain once every start is done and some failed.
func startFailure(leg *SagaLeg, starts *sagaStarts, n int) error {
	f := starts.failed.Load()
	if f == 0 {
		return nil
	}
	select {
	case <-starts.done:
		leg.Outcome = fmt.Sprintf("%d of %d starts failed", f, n)
		return fmt.Errorf("(c) sagas: %d of %d starts failed, e.g. %v", f, n, starts.sample.Load())
	default:
		return nil
	}
}

// terminateSagas ends the started sagas (they wait for payment) from a
// bounded pool; it runs even after a failure or the timeout. Each is deleted
// (DeleteWorkflowExecution terminates a running workflow, then removes its
// history and visibility record), so a run does not leave 10,000 histories
// in the Temporal server's database for the namespace's retention; where
// deletion is refused it is terminated.
func (e *orderEnv) terminateSagas(ctx context.Context) {
	e.mu.Lock()
	wids := append([]string(nil), e.startedIDs...)
	e.mu.Unlock()
	ok, failed, took := e.deleteWorkflows(ctx, wids, "(c) sagas")
	if leg := e.report.Sagas; leg != nil && len(wids) > 0 {
		leg.TerminateS, leg.Terminated = took.Seconds(), int(ok)
	}
	if failed > 0 {
		e.report.Notes = append(e.report.Notes, fmt.Sprintf("%d sagas could not be terminated: they cancel themselves when their payment timer fires (15 min)", failed))
	}
}

// deleteWorkflow deletes one workflow execution (terminating it if it
// runs); where deletion is refused it terminates it.
func (e *orderEnv) deleteWorkflow(ctx context.Context, wid string) error {
	_, err := e.conns.Temporal.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace: e.cfg.TemporalNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid}})
	if err != nil && !isNotFound(err) {
		err = e.conns.Temporal.TerminateWorkflow(ctx, wid, "", "seckill bench order: measured; clean-up")
	}
	return err
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

func milestoneText(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"10%", "50%", "90%", "100%"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func toInt64(v any) int64 {
	var n int64
	if s, ok := v.(string); ok {
		_, _ = fmt.Sscan(s, &n)
	}
	return n
}
