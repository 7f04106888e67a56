package sagaworker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/workers/sagaworker"
	"github.com/seckill/seckill/workflows"
)

// sagaV2 is version 2's ReservationSaga: the same saga behind one more
// command (a timer) at the start. A v1 history replayed on it fails with a
// non-determinism error, so a v1 saga that reached a v2 worker would show
// a failed workflow task.
func sagaV2(ctx workflow.Context, in workflows.SagaInput) (workflows.SagaState, error) {
	if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
		return workflows.SagaState{}, err
	}
	return workflows.ReservationSaga(ctx, in)
}

// versioningRig is one test's stack: a fresh database, a sale, its own task
// queue and worker deployment (named after the queue), the process's client
// (it starts the sagas, with eager start, as the saga starter does) and the
// workers' client on its connection, as app.RunWorkers wires a versioned
// saga worker (temporalx.Detached).
type versioningRig struct {
	cfg     config.Config
	tc      client.Client
	workers client.Client
	acts    *activities.Activities
	d       *ids.Deriver
	k       lua.Keys
	rdb     redis.UniversalClient
	dep     string
	run     string // this run's suffix of the build ids
}

func newVersioningRig(t *testing.T) *versioningRig {
	cfg := testenv.Require(t)
	// One task queue and deployment for every run: the server keeps a
	// deployment long after its workers stop and takes at most 100 per
	// namespace (matching.maxDeployments); old versions of one deployment it
	// deletes itself once drained. Each run has build ids of its own.
	cfg.TemporalTaskQueue = "seckill-versioning-test"
	cfg.WorkerDeployment = ""
	_, pool := testenv.Database(t, cfg)
	rdb := testenv.Redis(t, cfg)
	log := slog.New(slog.DiscardHandler)
	tc, err := temporalx.Dial(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	wc, err := temporalx.Detached(context.Background(), tc, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: pool, Redis: rdb, Log: log, Topic: cfg.TopicOrderCreate,
		TerminalTTL: cfg.ReservationTTL,
		Provider:    payments.PaysimProvider{Client: &paysim.Client{BaseURL: cfg.PaysimURL, MerchantKey: cfg.PaysimMerchantKey}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &versioningRig{cfg: cfg, tc: tc, workers: wc, acts: acts, d: testenv.Deriver(t, cfg),
		k: testenv.Sale(t, pool, rdb, 1, 100, 1000), rdb: rdb, dep: cfg.DeploymentName(),
		run: fmt.Sprintf("%x", testenv.RandomUint64()&0xffffffff)}
	r.unversioned(t)
	return r
}

// unversioned makes unversioned workers current again, as the deployment
// was before its first version, if an earlier run left one current.
func (r *versioningRig) unversioned(t *testing.T) {
	t.Helper()
	h := r.tc.WorkerDeploymentClient().GetHandle(r.dep)
	d, err := h.Describe(context.Background(), client.WorkerDeploymentDescribeOptions{})
	if err != nil || d.Info.RoutingConfig.CurrentVersion == nil {
		return // no deployment yet (NotFound), or unversioned already
	}
	if _, err := h.SetCurrentVersion(context.Background(), client.WorkerDeploymentSetCurrentVersionOptions{
		ConflictToken: d.ConflictToken, IgnoreMissingTaskQueues: true}); err != nil {
		t.Fatalf("make unversioned workers current: %v", err)
	}
}

func (r *versioningRig) version(build string) worker.WorkerDeploymentVersion {
	return worker.WorkerDeploymentVersion{DeploymentName: r.dep, BuildID: build + "-" + r.run}
}

// worker starts a saga worker polling as v (zero: unversioned); register nil
// registers the production set (sagaworker.Register). stop ends it early.
func (r *versioningRig) worker(t *testing.T, v worker.WorkerDeploymentVersion, register func(worker.Registry)) (stop func()) {
	t.Helper()
	var dep worker.DeploymentOptions
	if v != (worker.WorkerDeploymentVersion{}) {
		dep = temporalx.Versioned(v)
	}
	w, err := sagaworker.NewEmpty(r.workers, r.cfg.TemporalTaskQueue, 8, temporalx.InterceptorOptions{Registerer: prometheus.NewRegistry()}, dep)
	if err != nil {
		t.Fatal(err)
	}
	if register == nil {
		sagaworker.Register(w, r.acts, nil)
	} else {
		register(w)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	t.Cleanup(stop)
	return stop
}

// saga reserves a unit for user and starts its saga (SagaStartOptions: eager start).
func (r *versioningRig) saga(t *testing.T, user int64) events.OrderCreateRequested {
	t.Helper()
	m := testenv.MustReserve(t, r.rdb, r.d, r.k, user)
	run, err := r.tc.ExecuteWorkflow(context.Background(), workflows.SagaStartOptions(r.cfg.TemporalTaskQueue, m),
		workflows.ReservationSaga, workflows.SagaInput{Message: m, LocalForward: true})
	if err != nil {
		t.Fatalf("start saga: %v", err)
	}
	t.Cleanup(func() { _ = r.tc.TerminateWorkflow(context.Background(), run.GetID(), "", "test cleanup") })
	return m
}

// awaitOrder waits until the saga of m has its order and waits for the payment.
func (r *versioningRig) awaitOrder(ctx context.Context, t *testing.T, m events.OrderCreateRequested) {
	t.Helper()
	id := workflows.ReservationWorkflowID(m.ReservationID.String())
	await(ctx, t, "order of "+id, func() error {
		v, err := r.tc.QueryWorkflow(ctx, id, "", workflows.QueryState)
		if err != nil {
			return err
		}
		var st workflows.SagaState
		if err := v.Get(&st); err != nil {
			return err
		}
		if st.Status != state.SagaOrderCreated {
			return fmt.Errorf("status %s", st.Status)
		}
		return nil
	})
}

// cancel has the buyer cancel m's order and waits for the saga's result.
func (r *versioningRig) cancel(ctx context.Context, t *testing.T, m events.OrderCreateRequested) {
	t.Helper()
	id := workflows.ReservationWorkflowID(m.ReservationID.String())
	if err := r.tc.SignalWorkflow(ctx, id, "", workflows.SignalCancel, workflows.CancelSignal{Reason: "versioning test"}); err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
	var st workflows.SagaState
	if err := r.tc.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil {
		t.Fatalf("saga %s: %v", id, err)
	}
	if st.Status != state.SagaCancelled {
		t.Fatalf("saga %s ended %s, want %s (steps %q)", id, st.Status, state.SagaCancelled, st.Steps)
	}
}

// pinnedTo fails t unless m's saga is pinned to build (DescribeWorkflowExecution).
func (r *versioningRig) pinnedTo(ctx context.Context, t *testing.T, m events.OrderCreateRequested, build string) {
	t.Helper()
	id := workflows.ReservationWorkflowID(m.ReservationID.String())
	d, err := r.tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	if vi.GetBehavior() != enumspb.VERSIONING_BEHAVIOR_PINNED || vi.GetDeploymentVersion().GetBuildId() != build ||
		vi.GetDeploymentVersion().GetDeploymentName() != r.dep {
		t.Errorf("saga %s: versioning info %v, want pinned to %s:%s", id, vi, r.dep, build)
	}
}

// tasks returns the build id of every completed workflow task of m's saga,
// whether its first command was a timer, and fails t on a failed workflow
// task (a non-determinism error is one).
func (r *versioningRig) tasks(ctx context.Context, t *testing.T, m events.OrderCreateRequested) (builds []string, timerFirst bool) {
	t.Helper()
	id := workflows.ReservationWorkflowID(m.ReservationID.String())
	it := r.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first := true
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			t.Errorf("saga %s: workflow task failed: %v", id, e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			builds = append(builds, taskBuild(e.GetWorkflowTaskCompletedEventAttributes()))
		case enumspb.EVENT_TYPE_TIMER_STARTED, enumspb.EVENT_TYPE_MARKER_RECORDED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if first {
				timerFirst = e.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED
				first = false
			}
		}
	}
	return builds, timerFirst
}

func taskBuild(a *historypb.WorkflowTaskCompletedEventAttributes) string {
	if b := a.GetDeploymentVersion().GetBuildId(); b != "" {
		return b
	}
	if v := a.GetWorkerDeploymentVersion(); v != "" {
		return v[strings.LastIndex(v, ":")+1:]
	}
	return a.GetDeployment().GetBuildId()
}

// openPinned counts the running workflows pinned to build: what the server
// counts to call a version drained.
func (r *versioningRig) openPinned(ctx context.Context, build string) (int64, error) {
	resp, err := r.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`BuildIds = "pinned:%s:%s" AND ExecutionStatus = "Running"`, r.dep, build)})
	return resp.GetCount(), err
}

// await retries f every 100 ms until it succeeds, failing t when ctx ends.
func await(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestWorkerVersioningPinnedSagas deploys a second build of the saga worker
// while sagas of the first run (docs/operations.md, "Deploying the saga
// worker"): a saga of an unversioned worker, and one started before any
// version was current, move to v1 when v1 becomes current; v1's sagas finish on v1 after v2 (whose ReservationSaga issues
// one more command) becomes current, with no failed workflow task; new sagas
// run on v2; a v1 worker restarting under SECKILL_WORKER_SET_CURRENT=auto
// does not take the current version back; v1 then has no open pinned
// workflow and its workers stop.
func TestWorkerVersioningPinnedSagas(t *testing.T) {
	r := newVersioningRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v1, v2 := r.version("v1"), r.version("v2")

	// Before versioning: a saga on an unversioned worker, left waiting for its payment.
	stop0 := r.worker(t, worker.WorkerDeploymentVersion{}, nil)
	old := r.saga(t, 1)
	r.awaitOrder(ctx, t, old)
	stop0()
	// A saga started while no worker polls and no version is current waits
	// on the unversioned queue.
	early := r.saga(t, 7)

	// v1 comes up; with no current version it makes itself current.
	stop1 := r.worker(t, v1, nil)
	if p, err := temporalx.PromoteVersion(ctx, r.tc, v1, "test"); err != nil || !p.Set {
		t.Fatalf("promote v1 into a deployment without a current version: %+v, %v; want it set", p, err)
	}
	r.awaitOrder(ctx, t, early) // not stranded: its first task goes to v1
	r.pinnedTo(ctx, t, early, v1.BuildID)
	ones := []events.OrderCreateRequested{early, r.saga(t, 2), r.saga(t, 3), r.saga(t, 4)}
	for _, m := range ones {
		r.awaitOrder(ctx, t, m)
		r.pinnedTo(ctx, t, m, v1.BuildID)
	}
	r.cancel(ctx, t, old) // the unversioned saga's next task goes to v1, the current version
	if builds, _ := r.tasks(ctx, t, old); builds[len(builds)-1] != v1.BuildID {
		t.Errorf("the unversioned saga's last workflow task ran on %q, want v1 (all: %q)", builds[len(builds)-1], builds)
	}

	// v2 comes up with a changed ReservationSaga and becomes current (a newer
	// build than the current one: the auto rule sets it).
	r.worker(t, v2, func(reg worker.Registry) {
		reg.RegisterWorkflowWithOptions(sagaV2, workflow.RegisterOptions{Name: "ReservationSaga",
			VersioningBehavior: workflow.VersioningBehaviorPinned})
		reg.RegisterActivity(r.acts)
	})
	if p, err := temporalx.PromoteVersion(ctx, r.tc, v2, "test"); err != nil || !p.Set {
		t.Fatalf("promote v2 over v1: %+v, %v; want it set", p, err)
	}
	// A v1 worker restarting now leaves v2 current.
	if p, err := temporalx.PromoteVersion(ctx, r.tc, v1, "test"); err != nil || p.Set || p.Current == nil || *p.Current != v2 {
		t.Fatalf("promote v1 again after v2 became current: %+v, %v; want v2 kept", p, err)
	}

	// Started by a process that also runs a v1 worker: eager start on its
	// client would hand them to v1; the workers' own client keeps them off it.
	twos := []events.OrderCreateRequested{r.saga(t, 5), r.saga(t, 6), r.saga(t, 8), r.saga(t, 9)}
	for _, m := range twos {
		r.awaitOrder(ctx, t, m)
		r.pinnedTo(ctx, t, m, v2.BuildID)
	}
	for _, m := range ones {
		r.cancel(ctx, t, m)
		r.pinnedTo(ctx, t, m, v1.BuildID)
		builds, timerFirst := r.tasks(ctx, t, m)
		for _, b := range builds {
			if b != v1.BuildID {
				t.Errorf("v1 saga %s: a workflow task ran on %q (all: %q)", m.ReservationID, b, builds)
			}
		}
		if timerFirst {
			t.Errorf("v1 saga %s starts with v2's timer", m.ReservationID)
		}
	}
	for _, m := range twos {
		r.cancel(ctx, t, m)
		builds, timerFirst := r.tasks(ctx, t, m)
		if !timerFirst {
			t.Errorf("v2 saga %s does not start with v2's timer: v2's code did not run it", m.ReservationID)
		}
		for _, b := range builds {
			if b != v2.BuildID {
				t.Errorf("v2 saga %s: a workflow task ran on %q (all: %q)", m.ReservationID, b, builds)
			}
		}
	}

	// Drain v1: no longer current, no open workflow pinned to it; its workers stop.
	h := r.tc.WorkerDeploymentClient().GetHandle(r.dep)
	dv, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: v1.BuildID})
	if err != nil {
		t.Fatal(err)
	}
	if di := dv.Info.DrainageInfo; di == nil || di.DrainageStatus == client.WorkerDeploymentVersionDrainageStatusUnspecified {
		t.Errorf("v1 drainage info %+v, want draining or drained", di)
	}
	await(ctx, t, "no open workflow pinned to v1", func() error {
		n, err := r.openPinned(ctx, v1.BuildID)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d open", n)
		}
		return err
	})
	if n, err := r.openPinned(ctx, v2.BuildID); err != nil || n != 0 {
		t.Errorf("open workflows pinned to v2 after their cancel: %d, %v", n, err)
	}
	stop1()
	t.Logf("v1 drainage %+v", dv.Info.DrainageInfo)
}
