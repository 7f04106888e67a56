package temporalx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/internal/testenv"
)

// outerSpy is a caller's own interceptor: NewWorker must keep it, outside
// the ActivityInterceptor, so it sees the classified error.
type outerSpy struct {
	interceptor.WorkerInterceptorBase
	mu   sync.Mutex
	errs []error
}

func (o *outerSpy) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &outerSpyInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, o: o}
}

type outerSpyInbound struct {
	interceptor.ActivityInboundInterceptorBase
	o *outerSpy
}

func (i *outerSpyInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := i.Next.ExecuteActivity(ctx, in)
	i.o.mu.Lock()
	i.o.errs = append(i.o.errs, err)
	i.o.mu.Unlock()
	return res, err
}

// runOnDevServer runs retryForever (short backoff, no attempt limit) on a
// worker built by NewWorker on the stack's Temporal dev server.
func runOnDevServer(t *testing.T, act func(context.Context) (int32, error), spy *outerSpy) (int32, *prometheus.Registry, *recorder, error) {
	t.Helper()
	cfg := testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	reg := prometheus.NewRegistry()
	rec := &recorder{}
	queue := fmt.Sprintf("interceptor-test-%x", testenv.RandomUint64())
	var opts worker.Options
	if spy != nil {
		opts.Interceptors = []interceptor.WorkerInterceptor{spy}
	}
	w, err := NewWorker(c, queue, opts, InterceptorOptions{Registerer: reg, AttemptsAlert: 3, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	w.RegisterWorkflowWithOptions(retryForever, workflow.RegisterOptions{Name: retryForeverName})
	w.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: flakyName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, retryForeverName,
		retryForeverInput{Initial: 100 * time.Millisecond, Max: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var got int32
	err = run.Get(ctx, &got)
	if ctx.Err() != nil {
		t.Fatalf("workflow did not finish: %v", err)
	}
	return got, reg, rec, err
}

func TestInterceptorOnDevServer(t *testing.T) {
	t.Run("22001 fails the workflow after one attempt", func(t *testing.T) {
		var calls atomic.Int32
		tooLong := fmt.Errorf("insert order: %w", pgErr("22001", "value too long for type character varying(64)"))
		errs := make([]error, 20) // more than the test's patience: only classification ends it
		for i := range errs {
			errs[i] = tooLong
		}
		spy := &outerSpy{}
		_, reg, rec, err := runOnDevServer(t, flaky(&calls, errs...), spy)
		assertPermanentFailure(t, err, calls.Load(), reg)
		var we *temporal.WorkflowExecutionError
		var ae *temporal.ActivityError
		if !errors.As(err, &we) || !errors.As(err, &ae) {
			t.Errorf("error %T %v is not a workflow execution error from an activity", err, err)
		}
		if len(rec.find("activity.permanent_failure")) != 1 {
			t.Errorf("permanent failure not logged once: %v", rec.find("activity.permanent_failure"))
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		if len(spy.errs) != 1 {
			t.Fatalf("caller's interceptor saw %d executions, want 1", len(spy.errs))
		}
		if appErr, ok := spy.errs[0].(*temporal.ApplicationError); !ok || appErr.Type() != ErrTypePermanentDatabase {
			t.Errorf("caller's interceptor saw %T %v, want the classified ApplicationError", spy.errs[0], spy.errs[0])
		}
	})
	t.Run("40001 retries past the threshold once", func(t *testing.T) {
		var calls atomic.Int32
		serial := fmt.Errorf("commit: %w", pgErr("40001", "could not serialize access"))
		got, reg, rec, err := runOnDevServer(t, flaky(&calls, serial, serial, serial), nil)
		if err != nil {
			t.Fatalf("workflow failed: %v", err)
		}
		assertRetriedPastThreshold(t, got, calls.Load(), reg, 3)
		logs := rec.find("activity.attempts_exceeded")
		if len(logs) != 1 || logs[0]["attempt"] != "3" || logs[0]["workflow_id"] == "" {
			t.Errorf("attempts_exceeded logs = %v, want one at attempt 3", logs)
		}
	})
}
