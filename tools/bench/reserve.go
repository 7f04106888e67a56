package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/logx"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
)

// ReserveOptions are the settings of `seckill bench reserve` (its flags).
type ReserveOptions struct {
	Requests, Concurrency, Warmup int
	JSON                          bool
	RedisBenchmark                string
	Timeout                       time.Duration
	CPUProfile                    string
	Keep                          bool
	WaitIdle                      time.Duration
	Topic                         string
}

// Limits that keep one run bounded on a small machine.
const (
	benchMaxRequests    = 2_000_000
	benchMaxConcurrency = 1000
	// benchTTL is the reservation key TTL of the bench (ARGV[10] and the
	// in-process gateway's ReservationTTL): if the clean-up is interrupted,
	// the per-reservation keys still expire. It costs the same as the
	// production TTL (one PX argument either way).
	benchTTL = 2 * time.Hour
	// Topic is the RocketMQ topic of the bench's ORDER_CREATE_REQUESTED
	// messages (scripts/stack/rocketmq.sh creates it): same broker, same
	// send path, but no saga starter consumes it.
	Topic = "seckill_bench_create"
)

// SKUs of the bench activity.
const (
	benchSKURaw     int64 = 1 // in-stock, driven by redis-benchmark only
	benchSKUHTTP    int64 = 2 // in-stock, driven through the gateway only
	benchSKUSoldOut int64 = 3 // stock 0, both paths
)

// benchEnv is what the phases share.
type benchEnv struct {
	o        ReserveOptions
	rdb      *redis.Client
	rb       RedisBenchmark
	activity int64
	keyVer   int
	ncpu     int
	// gw is the gateway as `seckill api` runs it, gwOff the same without limits.
	gw, gwOff *benchGateway
	client    *http.Client
	bearer    []string // bearer[i] is "Bearer <token of user i+1>"
	progress  func(format string, args ...any)
	report    *Report
}

// Validate checks the options' bounds.
func (o ReserveOptions) Validate() error {
	switch {
	case o.Requests < 1000 || o.Requests > benchMaxRequests:
		return fmt.Errorf("--requests must be between 1000 and %d", benchMaxRequests)
	case o.Concurrency < 1 || o.Concurrency > benchMaxConcurrency || o.Concurrency > o.Requests:
		return fmt.Errorf("--concurrency must be between 1 and %d and at most --requests", benchMaxConcurrency)
	case o.Warmup < 0 || o.Warmup > o.Requests:
		return errors.New("--warmup must be between 0 and --requests")
	case o.Timeout <= 0 || o.Timeout > 30*time.Minute:
		return errors.New("--timeout must be positive and at most 30m")
	case o.WaitIdle < 0 || o.WaitIdle >= o.Timeout:
		return errors.New("--wait-idle must be at least 0 and below --timeout")
	}
	return nil
}

// RunReserve runs `seckill bench reserve` against the stack sys describes:
// progress goes to stderr, the report to stdout.
func RunReserve(ctx context.Context, sys config.Config, o ReserveOptions, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench: "+format+"\n", args...)
	}
	rbPath, err := exec.LookPath(o.RedisBenchmark)
	if err != nil {
		return fmt.Errorf("redis-benchmark not found (--redis-benchmark): %w", err)
	}
	redisHost, redisPort, err := loopbackAddr("SECKILL_REDIS_ADDR", sys.RedisAddr)
	if err != nil {
		return err
	}
	for _, ns := range sys.RocketMQNameServers {
		if _, _, err := loopbackAddr("SECKILL_ROCKETMQ_NAMESRV", ns); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// The gateway's connections, composed like `seckill api` (internal/app).
	// Only the reservation key TTL differs (benchTTL, see there).
	cfg := sys
	cfg.ReservationTTL = benchTTL
	cfg.TopicOrderCreate = o.Topic
	gwLog := logx.New(stderr, "warn")
	conns, err := app.Open(ctx, cfg, "seckill-bench-gateway", false, gwLog, nil)
	if err != nil {
		return err
	}
	defer conns.Close()
	pool, rdb := conns.Pool, conns.Redis
	d, err := app.Deriver(cfg)
	if err != nil {
		return err
	}
	authn, err := app.Authenticator(cfg)
	if err != nil {
		return err
	}

	// A missing topic would turn every gateway send into a slow failure:
	// check it with one probe message (nobody reads the bench topic).
	if o.Topic == Topic {
		pctx, c := context.WithTimeout(ctx, 10*time.Second)
		_, err := conns.Producer.Send(pctx, mq.Message{Topic: o.Topic, Key: "bench-probe", ID: uuid.NewString(),
			Tag: "BENCH_PROBE", Body: []byte(`{"bench_probe":true}`)})
		c()
		if err != nil {
			return fmt.Errorf("RocketMQ topic %s: %w (start the stack with `make up`, which creates it, or pass --topic)", o.Topic, err)
		}
	}

	// The bench activity: a random id far above hand-made ones.
	activityID := int64(900_000_000_000_000_000) + rand.Int64N(99_999_999_999_999_999) // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	now := time.Now().UTC().Truncate(time.Second)
	act := sale.Activity{
		ActivityID: activityID, Name: "seckill bench reserve " + now.Format(time.RFC3339),
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 600,
		SKUs: []sale.SKU{
			{SKUID: benchSKURaw, Stock: int64(o.Requests) + 1000},
			{SKUID: benchSKUHTTP, Stock: int64(o.Requests+o.Warmup) + 1000},
			{SKUID: benchSKUSoldOut, Stock: 0},
		},
	}
	progress("activity %d: setting up SKUs %d (raw in-stock, stock %d), %d (HTTP in-stock, stock %d), %d (sold out)",
		activityID, benchSKURaw, act.SKUs[0].Stock, benchSKUHTTP, act.SKUs[1].Stock, benchSKUSoldOut)
	if _, err := sale.Setup(ctx, pool, rdb, act); err != nil {
		return fmt.Errorf("set up bench activity: %w", err)
	}
	if !o.Keep {
		defer func() {
			progress("cleaning up activity %d", activityID)
			if err := benchCleanup(context.WithoutCancel(ctx), rdb, pool, activityID, act.SKUs, progress); err != nil {
				progress("clean-up failed: %v (delete keys seckill:{%d:*}:* and the activity's PostgreSQL rows by hand)", err, activityID)
			}
		}()
	}
	// The raw SKU never meets the gateway: keep the send-due scanner off it
	// (its send_due scores are a day ahead anyway).
	if err := rdb.SRem(ctx, lua.ActiveSKUs, skuMember(activityID, benchSKURaw)).Err(); err != nil {
		return err
	}

	// The gateway, in process, built like `seckill api` (no failpoints armed).
	// The load comes from one address: the per-address limit still counts
	// every request (its cost is measured) but is set too high to trip. A
	// second gateway without limits serves the sold-out case once more: the
	// two sold-out cases' ratio is what the limits cost on the cheapest path.
	if cfg.RateLimitIP > 0 {
		cfg.RateLimitIP = 1 << 30
	}
	unlimited := cfg
	unlimited.RateLimitIP, unlimited.RateLimitUser, unlimited.RateLimitRead = 0, 0, 0
	tel := app.NewTelemetry()
	gw, err := startBenchGateway(ctx, cfg, conns, tel, gwLog)
	if err != nil {
		return err
	}
	defer gw.stop(ctx)
	gwOff, err := startBenchGateway(ctx, unlimited, conns, app.NewTelemetry(), gwLog)
	if err != nil {
		return err
	}
	defer gwOff.stop(ctx)
	progress("gateways listening on %s (limits: user %d, address %d per %s) and %s (no limits), in process",
		gw.base, cfg.RateLimitUser, cfg.RateLimitIP, cfg.RateLimitWindow, gwOff.base)

	progress("minting %d user tokens", o.Warmup+o.Requests)
	bearer := make([]string, o.Warmup+o.Requests)
	for i := range bearer {
		tok, err := authn.Mint(int64(i+1), time.Hour)
		if err != nil {
			return err
		}
		bearer[i] = "Bearer " + tok
	}

	rep := &Report{
		Command: fmt.Sprintf("seckill bench reserve --requests %d --concurrency %d --warmup %d --topic %s",
			o.Requests, o.Concurrency, o.Warmup, o.Topic),
		Started: now, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), MemGiB: memTotalGiB(),
		RedisBenchmark: Version(ctx, rbPath), ActivityID: activityID,
		Requests: o.Requests, Concurrency: o.Concurrency, Warmup: o.Warmup,
	}
	if o.WaitIdle > 0 {
		deadline := time.Now().Add(o.WaitIdle)
		for {
			busy, err := machineBusy(ctx, 2*time.Second)
			if err != nil || busy < 20 {
				break
			}
			if time.Now().After(deadline) {
				progress("machine still %.0f%% busy after --wait-idle %s: starting anyway", busy, o.WaitIdle)
				break
			}
			progress("machine %.0f%% busy: waiting for it to quieten", busy)
		}
	}
	if before, err := machineBusy(ctx, time.Second); err == nil {
		rep.BusyBeforePct = before
		progress("machine busy before the run: %.0f%% of %d CPUs", before, rep.CPUs)
	}
	if info, err := rdb.InfoMap(ctx, "server").Result(); err == nil {
		rep.RedisVersion = info["Server"]["redis_version"]
	}
	e := &benchEnv{o: o, rdb: rdb, activity: activityID, keyVer: d.CurrentVersion(), ncpu: runtime.NumCPU(),
		rb: RedisBenchmark{Path: rbPath, Host: redisHost, Port: redisPort, Clients: o.Concurrency,
			Requests: o.Requests, KeySpace: MaxKeySpace},
		gw: gw, gwOff: gwOff,
		client: NewClient(o.Concurrency, 10*time.Second), bearer: bearer, progress: progress, report: rep}
	defer e.client.CloseIdleConnections()

	runErr := e.runPhases(ctx)
	if runErr != nil {
		rep.Failures = append(rep.Failures, runErr.Error())
	}
	e.ratios()
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(stdout)
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("bench failed: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}

func (e *benchEnv) runPhases(ctx context.Context) error {
	if err := e.raw(ctx, "in-stock", benchSKURaw); err != nil {
		return err
	}
	if err := e.raw(ctx, "sold-out", benchSKUSoldOut); err != nil {
		return err
	}
	if err := e.http(ctx, e.gw, "in-stock", benchSKUHTTP); err != nil {
		return err
	}
	if err := e.http(ctx, e.gw, "sold-out", benchSKUSoldOut); err != nil {
		return err
	}
	return e.http(ctx, e.gwOff, "sold-out", benchSKUSoldOut)
}

// benchGateway is one in-process gateway of the bench.
type benchGateway struct {
	base, label string // label names the case's variant ("" or " (no limits)")
	reg         *prometheus.Registry
	srv         *http.Server
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
	g := &benchGateway{base: "http://" + ln.Addr().String(), reg: tel.Registry, srv: api.Server(ln.Addr().String(), h)}
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

// raw runs redis-benchmark EVALSHA of reserve.lua against one SKU.
func (e *benchEnv) raw(ctx context.Context, stock string, sku int64) error {
	name := "raw EVALSHA " + stock
	now := time.Now()
	call := ReserveCall{SHA: lua.Reserve.Hash(), ActivityID: e.activity, SKUID: sku, NowMS: now.UnixMilli(),
		KeyVersion: e.keyVer, SchemaVersion: ids.SchemaVersion, TTL: benchTTL,
		SendDueAtMS: now.Add(24 * time.Hour).UnixMilli()}
	e.progress("%s: redis-benchmark -c %d -n %d -r %d --csv EVALSHA %s 6 ...", name, e.o.Concurrency, e.o.Requests,
		MaxKeySpace, call.SHA)
	calls0, failed0, err := e.evalshaStats(ctx)
	if err != nil {
		return err
	}
	reserved0, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	s0, err := e.sample(ctx)
	if err != nil {
		return err
	}
	rr, err := e.rb.Run(ctx, call.Args())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s1, err := e.sample(ctx)
	if err != nil {
		return err
	}
	calls1, failed1, err := e.evalshaStats(ctx)
	if err != nil {
		return err
	}
	reserved1, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	reserved := reserved1 - reserved0
	c := Case{Name: name, Path: "raw", Stock: stock, Requests: e.o.Requests, Concurrency: e.o.Concurrency,
		ElapsedS: rr.Elapsed.Seconds(), RPS: rr.Row.RPS, Reservations: reserved,
		P50MS: rr.Row.P50MS, P99MS: rr.Row.P99MS, LatencyMeasured: rr.Row.HasLatency,
	}
	use, procs := Use(s0, s1, e.ncpu, rr.CPU), withChild(ProcDelta(s0.Procs, s1.Procs), "redis-benchmark", rr.CPU)
	c.CPU = Cost(use, e.o.Requests, e.ncpu)
	c.TopProcesses = topProcs(use, procs, e.o.Requests)
	c.OtherWorkPct = otherWork(use, procs, e.ncpu)
	c.RedisSnapshots = s1.AOFRewrites - s0.AOFRewrites
	// redis-benchmark's rps is requests over its own timer; the admitted
	// share of them runs at the same rate.
	c.ReservationsPS = rr.Row.RPS * float64(reserved) / float64(e.o.Requests)
	c.Outcome = fmt.Sprintf("reserved %d of %d; server EVALSHA calls +%d, failed +%d (all clients)%s",
		reserved, e.o.Requests, calls1-calls0, failed1-failed0, snapshots(c.RedisSnapshots))
	e.report.Cases = append(e.report.Cases, c)
	e.progress("%s: %.0f req/s, p50 %.3f ms, p99 %.3f ms; %s", name, c.RPS, c.P50MS, c.P99MS, c.Outcome)

	// redis-benchmark does not report error replies: check the server saw
	// the calls succeed and the script did what the case says.
	switch {
	case failed1 != failed0:
		return fmt.Errorf("%s: %d EVALSHA calls failed on the server (NOSCRIPT? wrong arguments?)", name, failed1-failed0)
	case calls1-calls0 < int64(e.o.Requests):
		return fmt.Errorf("%s: the server counted %d EVALSHA calls, want at least %d", name, calls1-calls0, e.o.Requests)
	case stock == "in-stock" && reserved < int64(e.o.Requests)-collisionAllowance(e.o.Requests):
		return fmt.Errorf("%s: only %d of %d calls reserved", name, reserved, e.o.Requests)
	case stock == "sold-out" && reserved != 0:
		return fmt.Errorf("%s: %d calls reserved on the sold-out SKU", name, reserved)
	}
	return nil
}

// collisionAllowance bounds the raw in-stock calls that may not reserve: a
// few random ids collide (__rand_int__ draws from MaxKeySpace values), and
// such a call answers ALREADY_RESERVED (user guard) or DUPLICATE_REQUEST
// (reservation key). Expected: about n²/(2K) per key kind, two kinds.
func collisionAllowance(n int) int64 {
	expected := float64(n) * float64(n) / float64(MaxKeySpace)
	return int64(3*expected) + 10
}

// http drives the in-process gateway's reserve endpoint for one SKU.
func (e *benchEnv) http(ctx context.Context, gw *benchGateway, stock string, sku int64) error {
	name := "HTTP " + stock + gw.label
	wantStatus, wantCode := http.StatusAccepted, []byte(`"QUEUED"`)
	if stock == "sold-out" {
		wantStatus, wantCode = http.StatusConflict, []byte(`"SOLD_OUT"`)
	}
	total := e.o.Warmup + e.o.Requests
	keys := make([]string, total)
	for i := range keys {
		keys[i] = uuid.NewString()
	}
	load := func(offset, n int, label string) LoadResult {
		l := Load{Client: e.client, Method: http.MethodPost, URL: gw.url(e.activity, sku), Requests: n, Concurrency: e.o.Concurrency,
			Header: func(i int, h http.Header) {
				h["Authorization"] = []string{e.bearer[offset+i]}
				h["Idempotency-Key"] = []string{keys[offset+i]}
			},
			Expect: func(status int, body []byte) bool {
				return status == wantStatus && bytes.Contains(body, wantCode)
			},
			ProgressEvery: 5 * time.Second,
			Progress: func(done int, el time.Duration) {
				e.progress("%s%s: %d/%d (%.0f/s)", name, label, done, n, float64(done)/el.Seconds())
			},
		}
		var out LoadResult
		pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) { out = l.Run(ctx) })
		return out
	}
	if e.o.Warmup > 0 {
		e.progress("%s: warm-up, %d requests (users 1..%d)", name, e.o.Warmup, e.o.Warmup)
		w := load(0, e.o.Warmup, " warm-up")
		if w.Unexpected > 0 || w.Stopped != "" {
			return fmt.Errorf("%s warm-up: %d unexpected answers (%s) %s; e.g. %s", name, w.Unexpected,
				StatusText(w.Status), w.Stopped, strings.Join(w.Samples, " | "))
		}
	}
	reserved0, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	memo0 := counterValue(gw.reg, "seckill_reserve_sold_out_memo_total", nil)
	pub0 := counterValue(gw.reg, "seckill_reservation_send_total", map[string]string{"source": "gateway", "result": reservation.OutcomePublished})
	var stopProfile func()
	if e.o.CPUProfile != "" {
		stopProfile, err = startProfile(fmt.Sprintf("%s-http-%s%s.pprof", e.o.CPUProfile, stock, map[bool]string{true: "-no-limits"}[gw.label != ""]))
		if err != nil {
			return err
		}
		defer func() {
			if stopProfile != nil {
				stopProfile()
			}
		}()
	}
	e.progress("%s: %d requests, %d workers (users %d..%d)", name, e.o.Requests, e.o.Concurrency, e.o.Warmup+1, total)
	s0, err := e.sample(ctx)
	if err != nil {
		return err
	}
	lr := load(e.o.Warmup, e.o.Requests, "")
	// The gateway answers before it sends (it batches its sends): the case
	// ends when the last queued message is published, and that tail counts.
	if stock == "in-stock" {
		drainStart := time.Now()
		for deadline := drainStart.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			sent := counterValue(gw.reg, "seckill_reservation_send_total", map[string]string{"source": "gateway", "result": reservation.OutcomePublished}) - pub0
			if int(sent) >= lr.Expected {
				break
			}
		}
		lr.Elapsed += time.Since(drainStart)
	}
	s1, err := e.sample(ctx)
	if err != nil {
		return err
	}
	if stopProfile != nil {
		stopProfile()
		stopProfile = nil
	}
	reserved1, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	memo := counterValue(gw.reg, "seckill_reserve_sold_out_memo_total", nil) - memo0
	pub := counterValue(gw.reg, "seckill_reservation_send_total", map[string]string{"source": "gateway", "result": reservation.OutcomePublished}) - pub0
	pending, err := e.rdb.ZCard(ctx, lua.Keys{ActivityID: e.activity, SKUID: sku}.SendDue()).Result()
	if err != nil {
		return err
	}
	lat := Summarize(lr.Latencies)
	reserved := reserved1 - reserved0
	c := Case{Name: name, Path: "http", Stock: stock, Requests: lr.Requests, Concurrency: e.o.Concurrency,
		ElapsedS: lr.Elapsed.Seconds(), Reservations: reserved,
		P50MS: MS(lat.P50), P99MS: MS(lat.P99), LatencyMeasured: true,
	}
	use, procs := Use(s0, s1, e.ncpu, 0), ProcDelta(s0.Procs, s1.Procs)
	c.CPU = Cost(use, lr.Requests, e.ncpu)
	c.TopProcesses = topProcs(use, procs, lr.Requests)
	c.OtherWorkPct = otherWork(use, procs, e.ncpu)
	c.RedisSnapshots = s1.AOFRewrites - s0.AOFRewrites
	if lr.Elapsed > 0 {
		c.RPS = float64(lr.Requests) / lr.Elapsed.Seconds()
		c.ReservationsPS = float64(reserved) / lr.Elapsed.Seconds()
	}
	c.Outcome = fmt.Sprintf("HTTP %s; reserved %d", StatusText(lr.Status), reserved)
	if stock == "in-stock" {
		c.Outcome += fmt.Sprintf("; published to %s by the gateway %.0f, send_due left %d", e.o.Topic, pub, pending)
	} else {
		c.Outcome += fmt.Sprintf("; answered from the sold-out memo %.0f, by the script %.0f", memo, float64(lr.Expected)-memo)
	}
	c.Outcome += snapshots(c.RedisSnapshots)
	e.report.Cases = append(e.report.Cases, c)
	e.progress("%s: %.0f req/s, p50 %.3f ms, p99 %.3f ms; %s", name, c.RPS, c.P50MS, c.P99MS, c.Outcome)

	switch {
	case lr.Unexpected > 0 || lr.Stopped != "" || lr.Requests != e.o.Requests:
		return fmt.Errorf("%s: %d unexpected answers of %d (want HTTP %d %s; got %s) %s; e.g. %s", name, lr.Unexpected,
			lr.Requests, wantStatus, wantCode, StatusText(lr.Status), lr.Stopped, strings.Join(lr.Samples, " | "))
	case stock == "in-stock" && reserved != int64(e.o.Requests):
		return fmt.Errorf("%s: %d answers QUEUED but Redis admitted %d", name, lr.Expected, reserved)
	case stock == "in-stock" && int64(pub) < reserved: // (warm-up sends may land inside the case)
		// A failed send is cheaper than a stored one: the figures would not
		// measure the path.
		return fmt.Errorf("%s: the gateway published %.0f of %d messages to %s", name, pub, reserved, e.o.Topic)
	case stock == "sold-out" && reserved != 0:
		return fmt.Errorf("%s: %d reservations on the sold-out SKU", name, reserved)
	}
	return nil
}

// ratios adds the HTTP/raw throughput ratios and their targets.
func (e *benchEnv) ratios() {
	r := e.report
	ri, rs := r.Case("raw EVALSHA in-stock"), r.Case("raw EVALSHA sold-out")
	hi, hs := r.Case("HTTP in-stock"), r.Case("HTTP sold-out")
	if ri != nil && hi != nil {
		r.Ratios = append(r.Ratios, NewRatio("HTTP in-stock / raw EVALSHA in-stock (reservations/s)",
			hi.ReservationsPS, ri.ReservationsPS, ">=", 0.60))
	}
	for _, c := range r.Cases {
		if c.OtherWorkPct >= 10 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: off-path work used %.0f%% of the machine during the case; its figures are understated",
				c.Name, c.OtherWorkPct))
		}
	}
	if off := r.Case("HTTP sold-out (no limits)"); hs != nil && off != nil && off.RPS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the rate limits' cost on the cheapest path: HTTP sold-out with limits / without = %.2f (requests/s), p50 %.3f vs %.3f ms",
			hs.RPS/off.RPS, hs.P50MS, off.P50MS))
	}
	if rs != nil && hs != nil {
		r.Ratios = append(r.Ratios, NewRatio("HTTP sold-out / raw EVALSHA sold-out (requests/s)",
			hs.RPS, rs.RPS, ">", 1.0))
		if ri != nil && ri.RPS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("for reference, HTTP sold-out / raw EVALSHA in-stock (requests/s) = %.2f", hs.RPS/ri.RPS))
		}
		if hs.P50MS > 0 && rs.P50MS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("sold-out p50: HTTP %.3f ms vs raw EVALSHA %.3f ms (%s)",
				hs.P50MS, rs.P50MS, map[bool]string{true: "HTTP faster", false: "raw faster"}[hs.P50MS < rs.P50MS]))
		}
	}
}

func (e *benchEnv) sample(ctx context.Context) (CPUSample, error) {
	s := CPUSample{At: time.Now(), Self: SelfCPU(), Procs: ReadProcTicks()}
	if me, ok := s.Procs[os.Getpid()]; ok {
		me.Name = benchSelf
		s.Procs[os.Getpid()] = me
	}
	busy, total, err := ReadMachineCPU()
	if err != nil {
		return s, err
	}
	s.MachineBusy, s.MachineTotal = busy, total
	info, err := e.rdb.Info(ctx, "cpu", "persistence").Result()
	if err != nil {
		return s, fmt.Errorf("redis INFO cpu persistence: %w", err)
	}
	s.AOFRewrites = InfoInt(info, "aof_rewrites") + InfoInt(info, "rdb_saves")
	s.Redis, s.RedisForks, err = ParseRedisCPU(info)
	return s, err
}

func (e *benchEnv) evalshaStats(ctx context.Context) (calls, failed int64, err error) {
	info, err := e.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("redis INFO commandstats: %w", err)
	}
	calls, failed = ParseCommandStat(info, "evalsha")
	return calls, failed, nil
}

func (e *benchEnv) reservedTotal(ctx context.Context, sku int64) (int64, error) {
	n, err := e.rdb.HGet(ctx, lua.Keys{ActivityID: e.activity, SKUID: sku}.Counter(), "reserved_total").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
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

// benchSelf names this process (gateway + load generator) in process lists.
const benchSelf = "bench (this process)"

// benchParticipants are the processes on the measured paths; CPU used by
// any other process (and unattributed machine time) is other work that ran
// on the machine during a case and took cores from it.
var benchParticipants = map[string]bool{benchSelf: true, "redis-server": true, "redis-benchmark": true,
	"rocketmq-broker": true, "rocketmq-namesrv": true}

// otherWork is the share of the machine's capacity (%) used during a case by
// anything off the measured path: other processes (including ones that came
// and went between snapshots) and kernel time not charged to a process.
func otherWork(u CPUUse, d []ProcCPU, ncpu int) float64 {
	participants := u.Self + u.Child + u.RedisForks
	for _, p := range d {
		if benchParticipants[p.Name] && p.Name != benchSelf && p.Name != "redis-benchmark" {
			participants += p.Seconds
		}
	}
	if u.Wall <= 0 || ncpu <= 0 {
		return 0
	}
	return 100 * max(0, u.Machine-participants) / (u.Wall.Seconds() * float64(ncpu))
}

// topProcs lists the 5 busiest processes and, last, the machine time no
// listed-or-not process accounts for (processes that started and ended
// within the case, e.g. a compiler run by someone else, and kernel work).
func topProcs(u CPUUse, d []ProcCPU, n int) []ProcCost {
	if u.RedisForks > 0 {
		d = withChild(d, "redis-server forks (AOF rewrite)", time.Duration(u.RedisForks*float64(time.Second)))
	}
	var seen float64
	for _, p := range d {
		seen += p.Seconds
	}
	top := TopProcs(d, n, 5)
	if rest := u.Machine - seen; rest > 0 && n > 0 {
		top = append(top, ProcCost{Name: "unattributed", US: rest * 1e6 / float64(n)})
	}
	return top
}

// machineBusy measures how busy the machine is (% of all CPUs) over d.
func machineBusy(ctx context.Context, d time.Duration) (float64, error) {
	b0, t0, err := ReadMachineCPU()
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	b1, t1, err := ReadMachineCPU()
	if err != nil || t1 == t0 {
		return 0, errors.Join(err, errors.New("no CPU time passed"))
	}
	return 100 * float64(b1-b0) / float64(t1-t0), nil
}

// snapshots mentions Redis persistence forks (AOF rewrite, RDB save) that
// ran during a case: they take CPU and slow the main thread (copy-on-write).
func snapshots(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("; Redis AOF rewrites/RDB saves during the case: %d", n)
}

// withChild adds a child process that exited before the second snapshot.
func withChild(d []ProcCPU, name string, cpu time.Duration) []ProcCPU {
	d = append(d, ProcCPU{Name: name, Seconds: cpu.Seconds()})
	sort.SliceStable(d, func(i, j int) bool { return d[i].Seconds > d[j].Seconds })
	return d
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// benchCleanup deletes the bench activity's Redis keys (SCAN + UNLINK in
// batches, per SKU), its active_skus members and its PostgreSQL rows.
func benchCleanup(ctx context.Context, rdb *redis.Client, pool *pgxpool.Pool, activityID int64, skus []sale.SKU,
	progress func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var deleted int64
	members := make([]any, 0, len(skus))
	for _, s := range skus {
		k := lua.Keys{ActivityID: activityID, SKUID: s.SKUID}
		pattern := strings.TrimSuffix(k.Counter(), "counter") + "*" // no glob characters in the prefix
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, pattern, 2000).Result()
			if err != nil {
				return fmt.Errorf("scan %s: %w", pattern, err)
			}
			for len(keys) > 0 {
				batch := keys[:min(len(keys), 500)]
				keys = keys[len(batch):]
				n, err := rdb.Unlink(ctx, batch...).Result()
				if err != nil {
					return fmt.Errorf("unlink: %w", err)
				}
				deleted += n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		members = append(members, skuMember(activityID, s.SKUID))
	}
	if err := rdb.SRem(ctx, lua.ActiveSKUs, members...).Err(); err != nil {
		return fmt.Errorf("srem %s: %w", lua.ActiveSKUs, err)
	}
	var rows [3]int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, q := range []string{
			`DELETE FROM inventory_reservation WHERE activity_id = $1`,
			`DELETE FROM sku_inventory WHERE activity_id = $1`,
			`DELETE FROM sale_activity WHERE activity_id = $1`,
		} {
			tag, err := tx.Exec(ctx, q, activityID)
			if err != nil {
				return err
			}
			rows[i] = tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete PostgreSQL rows: %w", err)
	}
	progress("deleted %d Redis keys; PostgreSQL rows: %d inventory_reservation, %d sku_inventory, %d sale_activity",
		deleted, rows[0], rows[1], rows[2])
	return nil
}

func skuMember(activityID, skuID int64) string {
	return strconv.FormatInt(activityID, 10) + ":" + strconv.FormatInt(skuID, 10)
}

// loopbackAddr splits host:port and refuses anything but a loopback host:
// the bench loads only this machine.
func loopbackAddr(name, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s=%q: %w", name, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("%s=%q: bad port", name, addr)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", 0, fmt.Errorf("%s=%q: the bench only loads 127.0.0.1 (loopback)", name, addr)
	}
	return host, port, nil
}

func memTotalGiB() float64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / (1 << 20)
		}
	}
	return 0
}
