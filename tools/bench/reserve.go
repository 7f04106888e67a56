package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/logx"
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
	progress := progressTo(stderr, "bench: ")
	rb, err := reserveTargets(sys, o)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// The gateway's connections, composed like `seckill api` (app/).
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

	// A missing topic would turn every gateway send into a slow failure:
	// check it with one probe message (nobody reads the bench topic).
	if o.Topic == Topic {
		if err := probeTopic(ctx, conns.Producer, o.Topic, 10*time.Second); err != nil {
			return fmt.Errorf("RocketMQ topic %s: %w (start the stack with `make up`, which creates it, or pass --topic)", o.Topic, err)
		}
	}
	return runReserveOn(ctx, cfg, conns, o, rb, gwLog, stdout, progress)
}

// reserveTargets finds redis-benchmark and refuses a stack that is not on
// this machine; the result is redis-benchmark's settings but the script.
func reserveTargets(sys config.Config, o ReserveOptions) (RedisBenchmark, error) {
	rbPath, err := exec.LookPath(o.RedisBenchmark)
	if err != nil {
		return RedisBenchmark{}, fmt.Errorf("redis-benchmark not found (--redis-benchmark): %w", err)
	}
	redisHost, redisPort, err := loopbackAddr("SECKILL_REDIS_ADDR", sys.RedisAddr)
	if err != nil {
		return RedisBenchmark{}, err
	}
	for _, ns := range sys.RocketMQNameServers {
		if _, _, err := loopbackAddr("SECKILL_ROCKETMQ_NAMESRV", ns); err != nil {
			return RedisBenchmark{}, err
		}
	}
	return RedisBenchmark{Path: rbPath, Host: redisHost, Port: redisPort, Clients: o.Concurrency,
		Requests: o.Requests, KeySpace: MaxKeySpace}, nil
}

// reserveActivity is the bench activity: a random id far above hand-made
// ones, an in-stock SKU for each path and a sold-out SKU.
func reserveActivity(o ReserveOptions, now time.Time) sale.Activity {
	activityID := int64(900_000_000_000_000_000) + rand.Int64N(99_999_999_999_999_999) // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	return sale.Activity{
		ActivityID: activityID, Name: "seckill bench reserve " + now.Format(time.RFC3339),
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 600,
		SKUs: []sale.SKU{
			{SKUID: benchSKURaw, Stock: int64(o.Requests) + 1000},
			{SKUID: benchSKUHTTP, Stock: int64(o.Requests+o.Warmup) + 1000},
			{SKUID: benchSKUSoldOut, Stock: 0},
		},
	}
}

// runReserveOn sets up the bench activity and the gateways on the opened
// connections, runs the cases and writes the report.
func runReserveOn(ctx context.Context, cfg config.Config, conns *app.Conns, o ReserveOptions, rb RedisBenchmark,
	gwLog *slog.Logger, stdout io.Writer, progress func(string, ...any)) error {
	pool, rdb := conns.Pool, conns.Redis
	d, err := app.Deriver(cfg)
	if err != nil {
		return err
	}
	authn, err := app.Authenticator(cfg)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	act := reserveActivity(o, now)
	activityID := act.ActivityID
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
	gw, gwOff, err := startGateways(ctx, cfg, conns, gwLog, progress)
	if err != nil {
		return err
	}
	defer gw.stop(ctx)
	defer gwOff.stop(ctx)
	bearer, err := mintBearers(authn, o.Warmup+o.Requests, progress)
	if err != nil {
		return err
	}

	rep := &Report{
		Command: fmt.Sprintf("seckill bench reserve --requests %d --concurrency %d --warmup %d --topic %s",
			o.Requests, o.Concurrency, o.Warmup, o.Topic),
		Started: now, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), MemGiB: memTotalGiB(),
		RedisBenchmark: Version(ctx, rb.Path), ActivityID: activityID,
		Requests: o.Requests, Concurrency: o.Concurrency, Warmup: o.Warmup,
	}
	waitForIdle(ctx, o.WaitIdle, progress)
	rep.BusyBeforePct = busyBefore(ctx, rep.CPUs, progress)
	if info, err := rdb.InfoMap(ctx, "server").Result(); err == nil {
		rep.RedisVersion = info["Server"]["redis_version"]
	}
	e := &benchEnv{o: o, rdb: rdb, activity: activityID, keyVer: d.CurrentVersion(), ncpu: runtime.NumCPU(), rb: rb,
		gw: gw, gwOff: gwOff, client: NewClient(o.Concurrency, 10*time.Second), bearer: bearer, progress: progress, report: rep}
	defer e.client.CloseIdleConnections()

	if runErr := e.runPhases(ctx); runErr != nil {
		rep.Failures = append(rep.Failures, runErr.Error())
	}
	e.ratios()
	return writeReport(stdout, o.JSON, rep, rep.WriteText, &rep.Failures)
}

// mintBearers mints the tokens of users 1..n ("Bearer <token>").
func mintBearers(authn *auth.Authenticator, n int, progress func(string, ...any)) ([]string, error) {
	progress("minting %d user tokens", n)
	bearer := make([]string, n)
	for i := range bearer {
		tok, err := authn.Mint(int64(i+1), time.Hour)
		if err != nil {
			return nil, err
		}
		bearer[i] = "Bearer " + tok
	}
	return bearer, nil
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
