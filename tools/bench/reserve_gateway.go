package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
)

// startGateways starts the gateway, in process, built like `seckill api` (no
// failpoints armed). The load comes from one address: the per-address limit
// still counts every request (its cost is measured) but is set too high to
// trip. A second gateway without limits serves the sold-out case once more:
// the two sold-out cases' ratio is what the limits cost on the cheapest path.
func startGateways(ctx context.Context, cfg config.Config, conns *app.Conns, gwLog *slog.Logger,
	progress func(string, ...any)) (gw, gwOff *benchGateway, err error) {
	if cfg.RateLimitIP > 0 {
		cfg.RateLimitIP = 1 << 30
	}
	unlimited := cfg
	unlimited.RateLimitIP, unlimited.RateLimitUser, unlimited.RateLimitRead = 0, 0, 0
	tel := app.NewTelemetry()
	gw, err = startBenchGateway(ctx, cfg, conns, tel, gwLog)
	if err != nil {
		return nil, nil, err
	}
	gwOff, err = startBenchGateway(ctx, unlimited, conns, app.NewTelemetry(), gwLog)
	if err != nil {
		gw.stop(ctx)
		return nil, nil, err
	}
	progress("gateways listening on %s (limits: user %d, address %d per %s) and %s (no limits), in process",
		gw.base, cfg.RateLimitUser, cfg.RateLimitIP, cfg.RateLimitWindow, gwOff.base)
	return gw, gwOff, nil
}

// benchGateway is one in-process gateway of the bench.
type benchGateway struct {
	base, label string // label names the case's variant ("" or " (no limits)")
	reg         *prometheus.Registry
	srv         *http.Server
	win         serveWindow
}

// serveWindow counts the answers a gateway wrote and when: the first
// request's arrival and the last answer's end since the last reset. With an
// external load generator it is the case's elapsed time.
type serveWindow struct {
	served      atomic.Int64
	first, last atomic.Int64 // UnixNano; 0: none since the reset
}

func (w *serveWindow) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.first.CompareAndSwap(0, time.Now().UnixNano())
		h.ServeHTTP(rw, r)
		w.last.Store(time.Now().UnixNano())
		w.served.Add(1)
	})
}

func (w *serveWindow) reset() { w.first.Store(0); w.last.Store(0) }

// elapsed is the first request's arrival to the last answer's end.
func (w *serveWindow) elapsed() time.Duration {
	f, l := w.first.Load(), w.last.Load()
	if f == 0 || l < f {
		return 0
	}
	return time.Duration(l - f)
}

func startBenchGateway(ctx context.Context, cfg config.Config, conns *app.Conns, tel *app.Telemetry, log *slog.Logger) (*benchGateway, error) {
	h, err := app.APIHandler(cfg, conns, tel, &failpoint.Set{}, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &benchGateway{base: "http://" + ln.Addr().String(), reg: tel.Registry}
	g.srv = api.Server(ln.Addr().String(), g.win.wrap(h))
	if cfg.RateLimitIP == 0 && cfg.RateLimitUser == 0 {
		g.label = " (no limits)"
	}
	go pprof.Do(context.WithoutCancel(ctx), pprof.Labels("role", "gateway"), func(context.Context) { _ = g.srv.Serve(ln) }) // #nosec G118 -- the server lives as long as the benchmark, which stops it
	return g, nil
}

func (g *benchGateway) url(activity, sku int64) string {
	return fmt.Sprintf("%s/v1/activities/%d/skus/%d/reservations", g.base, activity, sku)
}

func (g *benchGateway) stop(ctx context.Context) {
	sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer c()
	_ = g.srv.Shutdown(sctx)
}

// counterValue sums the counters named name whose labels include want.
func counterValue(reg *prometheus.Registry, name string, want map[string]string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
