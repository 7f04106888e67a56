package workflows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workflows"
)

func TestSmokeWorkflowOnDevServer(t *testing.T) {
	cfg := testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := temporalx.Dial(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	missing, err := temporalx.MissingSearchAttributes(ctx, c, cfg.TemporalNamespace, workflows.SearchAttributeNames)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("search attributes not registered: %v", missing)
	}

	queue := fmt.Sprintf("smoke-test-%x", testenv.RandomUint64())
	w, err := temporalx.NewWorker(c, queue, worker.Options{}, temporalx.InterceptorOptions{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	w.RegisterWorkflow(workflows.Smoke)
	w.RegisterActivity(&activities.Smoke{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "smoke-" + queue, TaskQueue: queue}, workflows.Smoke, "seckill")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "hello, seckill" {
		t.Fatalf("smoke workflow result = %q", got)
	}
}
