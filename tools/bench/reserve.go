package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
)

// ReserveOptions are the settings of `seckill-dev bench reserve` (its flags).
type ReserveOptions struct {
	Requests, Concurrency, Warmup int
	JSON                          bool
	RedisBenchmark                string
	Timeout                       time.Duration
	CPUProfile                    string
	Keep                          bool
	WaitIdle                      time.Duration
	Topic                         string
	Wrk                           string // the wrk executable ("": wrk on PATH)
	// FixedRateDuration is the length of the fixed-rate case: HTTP in-stock
	// paced at half the peak in-stock rate, for its latency (0: no such case).
	FixedRateDuration time.Duration
}

// LoadGenWrk names wrk, the load generator of the HTTP cases (wrk.go).
const LoadGenWrk = "wrk"

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
	benchSKUFixed   int64 = 5 // in-stock, the fixed-rate case
)

// benchEnv is what the phases share.
type benchEnv struct {
	o        ReserveOptions
	rdb      redis.UniversalClient
	rb       RedisBenchmark
	activity int64
	keyVer   int
	ncpu     int
	// gw is the gateway as `seckill api` runs it, gwOff the same without limits.
	gw, gwOff *benchGateway
	tokens    []string // tokens[i] is the token of user i+1
	wrk       string   // the wrk executable
	progress  func(format string, args ...any)
	report    *Report
}

// Validate checks the options' bounds.
func (o ReserveOptions) Validate() error {
	switch {
	case o.Requests < 100 || o.Requests > benchMaxRequests:
		return fmt.Errorf("--requests must be between 100 and %d", benchMaxRequests)
	case o.Concurrency < 1 || o.Concurrency > benchMaxConcurrency || o.Concurrency > o.Requests:
		return fmt.Errorf("--concurrency must be between 1 and %d and at most --requests", benchMaxConcurrency)
	case o.Warmup < 0 || o.Warmup > o.Requests:
		return errors.New("--warmup must be between 0 and --requests")
	case o.Timeout <= 0 || o.Timeout > 30*time.Minute:
		return errors.New("--timeout must be positive and at most 30m")
	case o.WaitIdle < 0 || o.WaitIdle >= o.Timeout:
		return errors.New("--wait-idle must be at least 0 and below --timeout")
	case o.FixedRateDuration < 0 || o.FixedRateDuration > 10*time.Minute:
		return errors.New("--fixed-rate-duration must be between 0 and 10m")
	}
	return nil
}

// findWrk resolves --wrk.
func (o ReserveOptions) findWrk() (string, error) {
	name := o.Wrk
	if name == "" {
		name = "wrk"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("wrk not found (--wrk; `scripts/stack.sh up` installs the Debian package wrk): %w", err)
	}
	return path, nil
}

// RunReserve runs `seckill-dev bench reserve` against the stack sys describes:
// progress goes to stderr, the report to stdout.
func RunReserve(ctx context.Context, sys config.Config, o ReserveOptions, stdout, stderr io.Writer) error {
	rep, err := ReserveReport(ctx, sys, o, stderr)
	if rep == nil {
		return err
	}
	return writeReport(stdout, o.JSON, rep, rep.WriteText, &rep.Failures)
}

// ReserveReport runs `seckill-dev bench reserve` and returns its report; a
// failed case is in its Failures (nil report: the run could not start).
func ReserveReport(ctx context.Context, sys config.Config, o ReserveOptions, stderr io.Writer) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := progressTo(stderr, "bench: ")
	rb, err := reserveTargets(sys, o)
	if err != nil {
		return nil, err
	}
	wrkPath, err := o.findWrk()
	if err != nil {
		return nil, err
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
		return nil, err
	}
	defer conns.Close()

	// A missing topic would turn every gateway send into a slow failure:
	// check it with one probe message (nobody reads the bench topic).
	if o.Topic == Topic {
		if err := probeTopic(ctx, conns.Producer, o.Topic, 10*time.Second); err != nil {
			return nil, fmt.Errorf("RocketMQ topic %s: %w (start the stack with `make up`, which creates it, or pass --topic)", o.Topic, err)
		}
	}
	e := &benchEnv{o: o, rb: rb, wrk: wrkPath, ncpu: runtime.NumCPU(), progress: progress}
	return e.runOn(ctx, cfg, conns, gwLog)
}

// reserveTargets finds redis-benchmark and refuses a stack that is not on
// this machine; the result is redis-benchmark's settings but the script.
func reserveTargets(sys config.Config, o ReserveOptions) (RedisBenchmark, error) {
	rbPath, err := exec.LookPath(o.RedisBenchmark)
	if err != nil {
		return RedisBenchmark{}, fmt.Errorf("redis-benchmark not found (--redis-benchmark): %w", err)
	}
	if err := singleRedis(sys); err != nil {
		return RedisBenchmark{}, err
	}
	if err := loopbackAll(sys); err != nil {
		return RedisBenchmark{}, err
	}
	redisHost, redisPort, _ := loopbackAddr("SECKILL_REDIS_ADDR", sys.RedisAddr)
	return RedisBenchmark{Path: rbPath, Host: redisHost, Port: redisPort, Clients: o.Concurrency,
		Requests: o.Requests, KeySpace: MaxKeySpace, User: sys.RedisUsername, Password: sys.RedisPassword}, nil
}

// reserveActivity is the bench activity: a random id far above hand-made
// ones, an in-stock SKU for each path (and the fixed-rate case) and a
// sold-out SKU.
func reserveActivity(o ReserveOptions, now time.Time) sale.Activity {
	activityID := int64(900_000_000_000_000_000) + rand.Int64N(99_999_999_999_999_999) // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	httpStock := int64(o.Requests+o.Warmup) + 1000
	a := sale.Activity{
		ActivityID: activityID, Name: "seckill bench reserve " + now.Format(time.RFC3339),
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 600,
		SKUs: []sale.SKU{
			{SKUID: benchSKURaw, Stock: int64(o.Requests) + 1000},
			{SKUID: benchSKUHTTP, Stock: httpStock},
			{SKUID: benchSKUSoldOut, Stock: 0},
		},
	}
	if o.FixedRateDuration > 0 {
		a.SKUs = append(a.SKUs, sale.SKU{SKUID: benchSKUFixed, Stock: httpStock})
	}
	// The cases reuse user ids from SKU to SKU: the per-user cap (docs/spec.md#user-cap)
	// must not turn a sold-out answer into SALE_LIMIT_REACHED. Its hold is still claimed.
	a.MaxPerUser = len(a.SKUs)
	return a
}

// runOn sets up the bench activity and the gateways on the opened
// connections, runs the cases and returns the report.
func (e *benchEnv) runOn(ctx context.Context, cfg config.Config, conns *app.Conns, gwLog *slog.Logger) (*Report, error) {
	o, progress := e.o, e.progress
	pool, rdb := conns.Pool, conns.Redis
	d, err := app.Deriver(cfg)
	if err != nil {
		return nil, err
	}
	authn, err := app.Authenticator(cfg)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	act := reserveActivity(o, now)
	activityID := act.ActivityID
	progress("activity %d: setting up SKUs %d (raw in-stock, stock %d), %d (HTTP in-stock, stock %d), %d (sold out)%s",
		activityID, benchSKURaw, act.SKUs[0].Stock, benchSKUHTTP, act.SKUs[1].Stock, benchSKUSoldOut,
		map[bool]string{true: fmt.Sprintf(" and %d (fixed rate)", benchSKUFixed)}[len(act.SKUs) > 3])
	if _, err := sale.Setup(ctx, pool, rdb, act); err != nil {
		return nil, fmt.Errorf("set up bench activity: %w", err)
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
		return nil, err
	}
	gw, gwOff, err := startGateways(ctx, cfg, conns, gwLog, progress)
	if err != nil {
		return nil, err
	}
	defer gw.stop(ctx)
	defer gwOff.stop(ctx)
	tokens, err := mintTokens(authn, o.Warmup+o.Requests, progress)
	if err != nil {
		return nil, err
	}
	rep := e.newReport(ctx, now, activityID)
	waitForIdle(ctx, o.WaitIdle, progress)
	rep.BusyBeforePct = busyBefore(ctx, rep.CPUs, progress)
	if info, err := rdb.InfoMap(ctx, "server").Result(); err == nil {
		rep.RedisVersion = info["Server"]["redis_version"]
	}
	e.rdb, e.activity, e.keyVer, e.gw, e.gwOff, e.tokens, e.report = rdb, activityID, d.CurrentVersion(), gw, gwOff, tokens, rep

	if runErr := e.runPhases(ctx); runErr != nil {
		rep.Failures = append(rep.Failures, runErr.Error())
	}
	e.ratios()
	return rep, nil
}

// newReport starts the run's report: its command line and the machine.
func (e *benchEnv) newReport(ctx context.Context, now time.Time, activityID int64) *Report {
	o := e.o
	cmd := fmt.Sprintf("seckill bench reserve --requests %d --concurrency %d --warmup %d --topic %s --fixed-rate-duration %s",
		o.Requests, o.Concurrency, o.Warmup, o.Topic, o.FixedRateDuration)
	rep := &Report{Command: cmd, Started: now, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), MemGiB: memTotalGiB(),
		RedisBenchmark: toolVersion(ctx, e.rb.Path), ActivityID: activityID,
		Requests: o.Requests, Concurrency: o.Concurrency, Warmup: o.Warmup, Wrk: toolVersion(ctx, e.wrk)}
	return rep
}

// mintTokens mints the tokens of users 1..n.
func mintTokens(authn *auth.Authenticator, n int, progress func(string, ...any)) ([]string, error) {
	progress("minting %d user tokens", n)
	tokens := make([]string, n)
	for i := range tokens {
		tok, err := authn.Mint(int64(i+1), time.Hour)
		if err != nil {
			return nil, err
		}
		tokens[i] = tok
	}
	return tokens, nil
}
