package temporalx

import (
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// metricsReportInterval is how often tally hands the SDK's accumulated
// counter/gauge/timer values to the Prometheus collectors. Prometheus scrapes
// every 15 s or so, so one second of delay is invisible.
const metricsReportInterval = time.Second

// temporalLatencyBuckets are the histogram buckets (seconds) for the SDK's
// timers (task schedule-to-start, execution, request latencies). They span a
// fast local activity (1 ms) to a long poll (70 s, the server's long-poll
// timeout is 60 s).
var temporalLatencyBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 70,
}

// MetricsHandler returns a client.MetricsHandler that exports the Temporal
// SDK's metrics into reg, for client.Options.MetricsHandler.
//
// The bridge is the SDK's own go.temporal.io/sdk/contrib/tally over tally's
// Prometheus reporter, with the SDK's Prometheus naming: counters get a
// _total suffix and timers become histograms in seconds with a _seconds
// suffix, e.g. temporal_request_total,
// temporal_workflow_task_schedule_to_start_latency_seconds_bucket,
// temporal_activity_execution_latency_seconds_bucket.
//
// A metric name the SDK reports with two different tag-key sets cannot be
// registered twice in Prometheus; the second set is dropped and logged once
// instead of panicking (tally's default).
//
// Values reach the collectors every metricsReportInterval from a goroutine
// that lives as long as the process, so call this once per process, not per
// client.
func MetricsHandler(reg prometheus.Registerer) (client.MetricsHandler, error) {
	if reg == nil {
		return nil, errors.New("temporalx: MetricsHandler needs a prometheus.Registerer")
	}
	// Names and label keys as the SDK's Prometheus options want them; label
	// values (task queue "seckill-saga", workflow types) kept as they are,
	// since Prometheus takes any UTF-8 there.
	sanitize := sdktally.PrometheusSanitizeOptions
	sanitize.ValueCharacters = tally.ValidCharacters{Ranges: []tally.SanitizeRange{{' ', unicode.MaxRune}}}
	var logged sync.Map
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: temporalLatencyBuckets,
		OnRegisterError: func(err error) {
			if _, seen := logged.LoadOrStore(err.Error(), struct{}{}); !seen {
				slog.Warn("temporal SDK metric not exported to Prometheus", "err", err)
			}
		},
	})
	scope, _ := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sanitize,
		// tally's own tally_internal_* gauges carry an "instance" label
		// that clashes with Prometheus's target label; leave them out.
		OmitCardinalityMetrics: true,
	}, metricsReportInterval)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), nil
}
