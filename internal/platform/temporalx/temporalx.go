// Package temporalx dials the Temporal server and builds workers with the
// settings measured to behave on this kind of machine (docs/benchmarks.md).
package temporalx

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/internal/platform/config"
)

// Option adjusts the client options of Dial.
type Option func(*client.Options)

// WithMetrics exports the SDK's metrics through h (see MetricsHandler).
func WithMetrics(h client.MetricsHandler) Option {
	return func(o *client.Options) { o.MetricsHandler = h }
}

// Dial connects to the Temporal frontend of cfg (SECKILL_TEMPORAL_ADDR, in
// SECKILL_TEMPORAL_NAMESPACE) and checks it answers. Its payloads go
// through cfg's Codec: every client and worker of the project encrypts.
func Dial(ctx context.Context, cfg config.Config, logger *slog.Logger, opts ...Option) (client.Client, error) {
	o, err := clientOptions(cfg, logger, opts)
	if err != nil {
		return nil, err
	}
	o.HostPort = cfg.TemporalAddress
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, o)
	if err != nil {
		return nil, fmt.Errorf("dial temporal at %s: %w", cfg.TemporalAddress, err)
	}
	return c, nil
}

// Detached returns a second client on c's connection, with Dial's options.
// A worker built on it takes no eager workflow start from c: the server
// (v1.29.1) hands an eager start's first task to the starting process's
// local worker whatever its worker deployment version, which would pin new
// sagas to a version that is no longer current (docs/operations.md,
// "Deploying the saga worker"). Close it before c.
func Detached(ctx context.Context, c client.Client, cfg config.Config, logger *slog.Logger, opts ...Option) (client.Client, error) {
	o, err := clientOptions(cfg, logger, opts)
	if err != nil {
		return nil, err
	}
	d, err := client.NewClientFromExistingWithContext(ctx, c, o)
	if err != nil {
		return nil, fmt.Errorf("temporal client for the versioned worker: %w", err)
	}
	return d, nil
}

func clientOptions(cfg config.Config, logger *slog.Logger, opts []Option) (client.Options, error) {
	if logger == nil {
		logger = slog.Default()
	}
	codec, err := CodecFor(cfg)
	if err != nil {
		return client.Options{}, err
	}
	o := client.Options{Namespace: cfg.TemporalNamespace, Logger: tlog.NewStructuredLogger(logger), DataConverter: codec.DataConverter()}
	if cfg.TemporalCompression == "none" {
		o.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if err := secure(cfg, &o); err != nil {
		return client.Options{}, err
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o, nil
}

// NewWorker returns a worker on taskQueue with autoscaling pollers, whose
// activities all run through an ActivityInterceptor built from ao (after
// any interceptors already in opts). With the SDK's fixed default pollers
// about 4 runs in 11 stalled for ~60 s on this machine (first workflow tasks
// waited while every poller long-polled the sticky queue); autoscaling
// pollers removed the stalls (MEASURED.md).
func NewWorker(c client.Client, taskQueue string, opts worker.Options, ao InterceptorOptions) (worker.Worker, error) {
	ai, err := NewActivityInterceptor(ao)
	if err != nil {
		return nil, err
	}
	opts.Interceptors = append(slices.Clone(opts.Interceptors), ai)
	if opts.WorkflowTaskPollerBehavior == nil {
		opts.WorkflowTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
	}
	if opts.ActivityTaskPollerBehavior == nil {
		opts.ActivityTaskPollerBehavior = worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{})
	}
	return worker.New(c, taskQueue, opts), nil
}

// MissingSearchAttributes returns which of want (name → type, e.g.
// "Keyword", "Int") the namespace does not have registered with that type.
func MissingSearchAttributes(ctx context.Context, c client.Client, ns string, want map[string]string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("list search attributes: %w", err)
	}
	var missing []string
	for name, typ := range want {
		got, ok := resp.GetCustomAttributes()[name]
		if !ok || !sameType(got.String(), typ) {
			missing = append(missing, fmt.Sprintf("%s (%s)", name, typ))
		}
	}
	return missing, nil
}

// sameType compares an enum name such as INDEXED_VALUE_TYPE_KEYWORD with "Keyword".
func sameType(enumName, typ string) bool {
	return strings.EqualFold(strings.TrimPrefix(enumName, "INDEXED_VALUE_TYPE_"), typ)
}
