package temporalx

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gatherUntil gathers reg until ok accepts the metric families or the
// deadline passes (tally hands values over once per metricsReportInterval).
func gatherUntil(t *testing.T, reg *prometheus.Registry, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		if ok(byName) {
			return byName
		}
		if time.Now().After(deadline) {
			names := make([]string, 0, len(byName))
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("metrics never reached the registry; have %v", names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestMetricsHandlerExportsToRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := MetricsHandler(reg)
	if err != nil {
		t.Fatal(err)
	}
	h.Counter("temporal_test").Inc(1)
	tagged := h.WithTags(map[string]string{"namespace": "seckill", "task_queue": "seckill-saga"})
	tagged.Counter("temporal_tagged").Inc(2)
	tagged.Gauge("temporal_test_gauge").Update(7)
	tagged.Timer("temporal_workflow_task_schedule_to_start_latency").Record(30 * time.Millisecond)
	// The same name with another tag-key set cannot be registered in
	// Prometheus: it must be dropped, not panic.
	h.WithTags(map[string]string{"other": "x"}).Counter("temporal_tagged").Inc(1)

	got := gatherUntil(t, reg, func(m map[string]*dto.MetricFamily) bool {
		c, ok := m["temporal_test_total"]
		if !ok || c.GetMetric()[0].GetCounter().GetValue() != 1 {
			return false
		}
		tl, ok := m["temporal_workflow_task_schedule_to_start_latency_seconds"]
		return ok && tl.GetMetric()[0].GetHistogram().GetSampleCount() == 1
	})

	for name := range got {
		if strings.HasPrefix(name, "tally_") {
			t.Errorf("tally internal metric %s exported", name)
		}
	}
	if typ := got["temporal_test_total"].GetType(); typ != dto.MetricType_COUNTER {
		t.Errorf("temporal_test_total type = %v, want COUNTER", typ)
	}

	tc := got["temporal_tagged_total"]
	if tc == nil || len(tc.GetMetric()) != 1 {
		t.Fatalf("temporal_tagged_total = %v, want one series", tc)
	}
	if v := tc.GetMetric()[0].GetCounter().GetValue(); v != 2 {
		t.Errorf("temporal_tagged_total = %v, want 2", v)
	}
	if l := labels(tc.GetMetric()[0]); l["namespace"] != "seckill" || l["task_queue"] != "seckill-saga" {
		t.Errorf("temporal_tagged_total labels = %v", l)
	}

	g := got["temporal_test_gauge"]
	if g == nil || g.GetMetric()[0].GetGauge().GetValue() != 7 {
		t.Errorf("temporal_test_gauge = %v, want 7", g)
	}

	hist := got["temporal_workflow_task_schedule_to_start_latency_seconds"]
	if hist.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("timer type = %v, want HISTOGRAM (for histogram_quantile on _bucket)", hist.GetType())
	}
	hm := hist.GetMetric()[0].GetHistogram()
	if s := hm.GetSampleSum(); s < 0.029 || s > 0.031 {
		t.Errorf("timer sum = %v s, want 0.03 (seconds, not ms/ns)", s)
	}
	if len(hm.GetBucket()) != len(temporalLatencyBuckets) {
		t.Errorf("timer has %d buckets, want %d", len(hm.GetBucket()), len(temporalLatencyBuckets))
	}
}

func TestMetricsHandlerNeedsRegisterer(t *testing.T) {
	if _, err := MetricsHandler(nil); err == nil {
		t.Fatal("MetricsHandler(nil) returned no error")
	}
}
