package app

import "net/http"

// WorkerHandler is what a worker's metrics listener serves: /metrics, and
// GET /healthz for a deployment's liveness and readiness probes
// (docs/deploy.md). The listener starts only after Open has connected to
// every store, and the process exits when one of its parts fails, so an
// answer means the worker is up with its parts running.
func WorkerHandler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return mux
}
