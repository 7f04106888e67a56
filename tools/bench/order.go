package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/migrations"
)

// OrderOptions are the settings of `seckill-dev bench order` (its flags).
type OrderOptions struct {
	Concurrency int
	Duration    time.Duration
	Sagas       int
	Starters    int
	JSON        bool
	PGBench     string
	Timeout     time.Duration
	SkipBroker  bool
	WaitIdle    time.Duration
	Keep        bool
	BrokerAddr  string
	// SkipPlain skips leg (d), the plain workflows (the baseline of (c)).
	SkipPlain bool
	// Between, if set, runs before legs (c) and (d) (`bench all` checks the
	// machine is idle there); an error stops the run.
	Between func(ctx context.Context, next string) error `json:"-"`
}

// CreateOrderTarget is the target of (b) CreateOrder / (a) pgbench (tx/s):
// one order transaction as fast as the four-statement script on one hot SKU.
const CreateOrderTarget = 1.00

// SKUs of the order bench's activity (one hot SKU per leg).
const (
	orderSKUPGBench int64 = 1 // (a) pgbench
	orderSKUCreate  int64 = 2 // (b) CreateOrder
	orderSKUSagas   int64 = 3 // (c) sagas, reserved through Redis
	orderPrice      int64 = 4999
	// orderBuildRate bounds the CreateOrder leg's pre-built messages per
	// second of --duration: far above what two cores do (~2,000/s).
	orderBuildRate = 8000
	// orderStall fails a wait that sees no progress for this long.
	orderStall = 2 * time.Minute
	// Targets of leg (c): sagas/s at least 1.5x plain workflows/s (leg (d)),
	// and a backlog of 10,000 reservations drained within 120 s.
	SagaPlainTarget = 1.5
	DrainBacklog    = 10_000
	DrainTargetS    = 120.0
)

// orderEnv is what the legs share.
type orderEnv struct {
	o          OrderOptions
	cfg        config.Config // points at the scratch database and the bench task queue
	conns      *app.Conns
	tel        *app.Telemetry
	rdb        redis.UniversalClient
	dsn        string
	runID      string
	activity   int64
	ncpu       int
	pgbench    string
	quiet      *slog.Logger
	progress   func(format string, args ...any)
	report     *OrderReport
	backlog    []reservation.Fields // leg (c)'s reservations, admitted in Redis
	startedIDs []string             // workflow ids of started sagas
	mu         sync.Mutex
}

// orderParticipants are the processes on each leg's path (besides this process).
var (
	orderPGPath     = map[string]bool{"postgres": true, "pgbench": true}
	orderBrokerPath = map[string]bool{"rocketmq-broker": true, "rocketmq-namesrv": true}
	// The dev server's process is "temporal", the real server's "temporal-server".
	orderSagaPath = map[string]bool{"postgres": true, "temporal": true, "temporal-server": true, "redis-server": true}
)

// Validate checks the options' bounds.
func (o OrderOptions) Validate() error {
	switch {
	case o.Concurrency < 1 || o.Concurrency > 256:
		return errors.New("--concurrency must be between 1 and 256")
	case o.Duration < time.Second || o.Duration > 10*time.Minute:
		return errors.New("--duration must be between 1s and 10m")
	case o.Sagas < 100 || o.Sagas > 200_000:
		return errors.New("--sagas must be between 100 and 200000")
	case o.Starters < 1 || o.Starters > 256:
		return errors.New("--starters must be between 1 and 256")
	case o.Timeout <= 0 || o.Timeout > 2*time.Hour:
		return errors.New("--timeout must be positive and at most 2h")
	case o.WaitIdle < 0 || o.WaitIdle >= o.Timeout:
		return errors.New("--wait-idle must be at least 0 and below --timeout")
	}
	return nil
}

// RunOrder runs `seckill-dev bench order` against the stack sys describes:
// progress goes to stderr, the report to stdout.
func RunOrder(ctx context.Context, sys config.Config, o OrderOptions, stdout, stderr io.Writer) error {
	rep, err := OrderRun(ctx, sys, o, stderr)
	if rep == nil {
		return err
	}
	return writeReport(stdout, o.JSON, rep, rep.WriteText, &rep.Failures)
}

// OrderRun runs `seckill-dev bench order` and returns its report; a failed leg
// is in its Failures (nil report: the run could not start).
func OrderRun(ctx context.Context, sys config.Config, o OrderOptions, stderr io.Writer) (*OrderReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := progressTo(stderr, "bench order: ")
	pgbPath, err := findPGBench(o.PGBench)
	if err != nil {
		return nil, err
	}
	cfg := sys
	if err := orderTargets(cfg, o); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	runID := hex.EncodeToString(rb[:])

	dbName := "seckill_bench_" + runID
	dsn, drop, err := scratchDatabase(ctx, cfg.PostgresDSN, dbName, o.Keep, progress)
	if err != nil {
		return nil, err
	}
	defer drop()
	if _, err := migrations.Up(ctx, dsn); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", dbName, err)
	}

	// The bench's processes point at the scratch database and a task queue
	// of their own: no other worker sees these sagas, and ours sees no other.
	cfg.PostgresDSN = dsn
	cfg.TemporalTaskQueue = "seckill-bench-order-" + runID
	cfg.TopicOrderCreate = Topic
	cfg.ReservationTTL = benchTTL
	quiet := logx.New(stderr, "warn")
	// Telemetry as `seckill worker` has it (Temporal SDK metrics included).
	tel := app.NewTelemetry()
	conns, err := app.Open(ctx, cfg, "seckill-bench-order", true, quiet, tel)
	if err != nil {
		return nil, err
	}
	defer conns.Close()

	e := &orderEnv{o: o, cfg: cfg, conns: conns, tel: tel, rdb: conns.Redis, dsn: dsn, runID: runID,
		ncpu: runtime.NumCPU(), pgbench: pgbPath, quiet: quiet, progress: progress}
	return e.runOn(ctx, dbName)
}

// orderTargets refuses a stack that is not on this machine.
func orderTargets(cfg config.Config, o OrderOptions) error {
	pgc, err := pgx.ParseConfig(cfg.PostgresDSN)
	if err != nil {
		return fmt.Errorf("SECKILL_PG_DSN: %w", err)
	}
	if err := singleRedis(cfg); err != nil {
		return err
	}
	return loopbackAll(cfg, "SECKILL_PG_DSN", net.JoinHostPort(pgc.Host, fmt.Sprint(pgc.Port)),
		"SECKILL_TEMPORAL_ADDR", cfg.TemporalAddress, "--broker-addr", o.BrokerAddr)
}

// orderActivity is the order bench's activity: one hot SKU per leg.
func orderActivity(o OrderOptions, now time.Time) sale.Activity {
	activityID := int64(900_000_000_000_000_000) + mrand.Int64N(99_999_999_999_999_999) // #nosec G404 -- non-cryptographic randomness: test traffic, never a secret
	return sale.Activity{
		ActivityID: activityID, Name: "seckill bench order " + now.Format(time.RFC3339),
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(3 * time.Hour),
		// The saga waits this long for payment (the bench terminates it).
		PaymentTimeoutSeconds: 900,
		// Generous: a slow drain must not turn into deadline rejections.
		OrderDeadlineSeconds: 3 * 3600,
		SKUs: []sale.SKU{
			{SKUID: orderSKUPGBench, Stock: sale.MaxStock, PriceCents: orderPrice},
			{SKUID: orderSKUCreate, Stock: sale.MaxStock, PriceCents: orderPrice},
			{SKUID: orderSKUSagas, Stock: int64(o.Sagas) + 1000, PriceCents: orderPrice},
		},
		// The legs reuse user ids from SKU to SKU: the order transaction's
		// per-user cap (docs/spec.md#user-cap) must not refuse them.
		MaxPerUser: 4,
	}
}

// runOn sets up the activity in the scratch database, runs the legs and
// returns the report.
func (e *orderEnv) runOn(ctx context.Context, dbName string) (*OrderReport, error) {
	o, conns, progress := e.o, e.conns, e.progress
	now := time.Now().UTC().Truncate(time.Second)
	act := orderActivity(o, now)
	activityID := act.ActivityID
	e.activity = activityID
	if _, err := sale.Setup(ctx, conns.Pool, conns.Redis, act); err != nil {
		return nil, fmt.Errorf("set up bench activity: %w", err)
	}
	// Keep every send-due scanner on this Redis away from the bench's SKUs
	// (their send_due scores are a day ahead anyway).
	members := []any{skuMember(activityID, orderSKUPGBench), skuMember(activityID, orderSKUCreate), skuMember(activityID, orderSKUSagas)}
	if err := conns.Redis.SRem(ctx, lua.ActiveSKUs, members...).Err(); err != nil {
		return nil, err
	}
	if !o.Keep {
		defer func() {
			progress("deleting the Redis keys of activity %d", activityID)
			if err := benchCleanup(context.WithoutCancel(ctx), conns.Redis, conns.Pool, activityID, act.SKUs, progress); err != nil {
				progress("clean-up failed: %v (delete keys seckill:{%d:*}:* by hand)", err, activityID)
			}
		}()
	}
	progress("activity %d: SKU %d for pgbench, %d for CreateOrder (stock %d each), %d for %d sagas",
		activityID, orderSKUPGBench, orderSKUCreate, sale.MaxStock, orderSKUSagas, o.Sagas)

	rep := &OrderReport{
		Command: fmt.Sprintf("seckill bench order --concurrency %d --duration %s --sagas %d --starters %d%s%s",
			o.Concurrency, o.Duration, o.Sagas, o.Starters, map[bool]string{true: " --skip-broker"}[o.SkipBroker],
			map[bool]string{true: " --skip-plain"}[o.SkipPlain]),
		Started: now, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), MemGiB: memTotalGiB(),
		PGBenchVersion: toolVersion(ctx, e.pgbench), Database: dbName, ActivityID: activityID,
		TaskQueue: e.cfg.TemporalTaskQueue, Concurrency: o.Concurrency, DurationS: o.Duration.Seconds(),
	}
	e.report = rep
	_ = conns.Pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&rep.PGVersion)
	waitForIdle(ctx, o.WaitIdle, progress)
	rep.BusyBeforePct = busyBefore(ctx, rep.CPUs, progress)

	if runErr := e.run(ctx); runErr != nil {
		rep.Failures = append(rep.Failures, runErr.Error())
	}
	e.ratios()
	return rep, nil
}

func (e *orderEnv) run(ctx context.Context) error {
	if err := e.vacuum(ctx); err != nil {
		return err
	}
	if err := e.pgbenchLeg(ctx); err != nil {
		return err
	}
	if err := e.vacuum(ctx); err != nil {
		return err
	}
	if err := e.createOrderLeg(ctx); err != nil {
		return err
	}
	if err := e.reserveBacklog(ctx); err != nil {
		return err
	}
	if !e.o.SkipBroker {
		if err := e.brokerLeg(ctx); err != nil {
			return err
		}
	} else {
		e.report.Notes = append(e.report.Notes, "broker leg skipped (--skip-broker)")
	}
	if e.o.Between != nil {
		if err := e.o.Between(ctx, "(c) sagas"); err != nil {
			return err
		}
	}
	if err := e.sagaLeg(ctx); err != nil {
		return err
	}
	if e.o.SkipPlain {
		e.report.Notes = append(e.report.Notes, "plain workflow leg (d) skipped (--skip-plain)")
		return nil
	}
	// The server deletes (c)'s sagas in the background: let it finish
	// before (d) is measured on the same server.
	if e.o.Between != nil {
		if err := e.o.Between(ctx, "(d) plain workflows"); err != nil {
			return err
		}
	} else if busy, ok := settle(ctx, settleBusyPct, time.Minute, e.progress); !ok {
		e.report.Notes = append(e.report.Notes, fmt.Sprintf("(d) plain: the machine was still %.0f%% busy after (c)'s clean-up when (d) started", busy))
	}
	return e.plainLeg(ctx)
}

func (e *orderEnv) ratios() {
	r := e.report
	if r.PGBench != nil && r.CreateOrder != nil {
		r.Ratios = append(r.Ratios, NewRatio("(b) CreateOrder / (a) pgbench 4 statements (tx/s)",
			r.CreateOrder.PerS, r.PGBench.PerS, ">=", CreateOrderTarget))
		if r.PGBench.P50MS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("p50 latency: CreateOrder %.2f ms vs pgbench %.2f ms (%.1fx)",
				r.CreateOrder.P50MS, r.PGBench.P50MS, r.CreateOrder.P50MS/r.PGBench.P50MS))
		}
	}
	if r.Sagas != nil && r.CreateOrder != nil && r.Sagas.SagasPS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("(c) sagas/s / (b) CreateOrder tx/s = %.3f: Temporal runs the backlog %.0fx slower than PostgreSQL takes orders",
			r.Sagas.SagasPS/r.CreateOrder.PerS, r.CreateOrder.PerS/r.Sagas.SagasPS))
	}
	if r.Broker != nil && r.Sagas != nil && r.Broker.ConsumePS > 0 && r.Sagas.SagasPS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("broker consume %.0f msg/s vs sagas %.1f/s: the backlog drains at the saga rate; the broker is not the limit",
			r.Broker.ConsumePS, r.Sagas.SagasPS))
	}
	e.sagaRatios()
	for _, l := range r.cpuLegs() {
		if l.c.OffPathPct >= 10 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: off-path work used %.0f%% of the machine during the leg; its figures are understated", l.name, l.c.OffPathPct))
		}
	}
}

// sagaRatios adds (c) against (d) and the drain time of a 10,000 backlog,
// extrapolated from (c)'s rate when the run's backlog was another size.
func (e *orderEnv) sagaRatios() {
	r := e.report
	s := r.Sagas
	if s == nil || s.DrainS <= 0 {
		return
	}
	if p := r.Plain; p != nil && p.DrainS > 0 {
		r.Ratios = append(r.Ratios, NewRatio("(c) sagas/s / (d) plain workflows/s (same server, same run)", s.SagasPS, p.SagasPS, ">=", SagaPlainTarget))
	}
	drain, name := s.DrainS, fmt.Sprintf("(c) drain time of a %d backlog (s)", DrainBacklog)
	if s.Sagas != DrainBacklog {
		drain = DrainBacklog / s.SagasPS
		name = fmt.Sprintf("(c) drain time of a %d backlog (s), extrapolated from %d at %.1f/s", DrainBacklog, s.Sagas, s.SagasPS)
	}
	r.Ratios = append(r.Ratios, Ratio{Name: name, Value: drain, Op: "<=", Target: DrainTargetS, Met: drain <= DrainTargetS})
}
