package app

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/platform/metrics"
)

// TestWorkerHandlerServesHealthAndMetrics: the worker's listener answers the
// probes on /healthz, the scraper on /metrics, and nothing else.
func TestWorkerHandlerServesHealthAndMetrics(t *testing.T) {
	tel := NewTelemetry()
	tel.Reservation.Resend.Inc()
	srv := httptest.NewServer(WorkerHandler(metrics.Handler(tel.Registry)))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/healthz", http.StatusOK, `{"status":"ok"}`},
		{http.MethodGet, "/metrics", http.StatusOK, "seckill_reservation_resend_total 1"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequest(c.method, srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
}
