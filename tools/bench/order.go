package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/logx"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/pg"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/migrations"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// OrderOptions are the settings of `seckill bench order` (its flags).
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
	WhatIf      bool
}

// SKUs of the order bench's activity (one hot SKU per leg).
const (
	orderSKUPGBench int64 = 1 // (a) pgbench
	orderSKUCreate  int64 = 2 // (b) CreateOrder
	orderSKUSagas   int64 = 3 // (c) sagas, reserved through Redis
	orderSKUReplay  int64 = 4 // (a') pgbench replaying CreateOrder's statements
	orderSKUWhatIf  int64 = 5 // --what-if: the replay with the stock UPDATE last
	orderPrice      int64 = 4999
	// orderBuildRate bounds the CreateOrder leg's pre-built messages per
	// second of --duration: far above what two cores do (~2,000/s).
	orderBuildRate = 8000
	// orderStall fails a wait that sees no progress for this long.
	orderStall = 2 * time.Minute
)

// orderEnv is what the legs share.
type orderEnv struct {
	o          OrderOptions
	cfg        config.Config // points at the scratch database and the bench task queue
	conns      *app.Conns
	tel        *app.Telemetry
	rdb        *redis.Client
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
	orderSagaPath   = map[string]bool{"postgres": true, "temporal": true, "redis-server": true}
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

// RunOrder runs `seckill bench order` against the stack sys describes:
// progress goes to stderr, the report to stdout.
func RunOrder(ctx context.Context, sys config.Config, o OrderOptions, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench order: "+format+"\n", args...)
	}
	pgbPath, err := findPGBench(o.PGBench)
	if err != nil {
		return err
	}
	cfg := sys
	pgc, err := pgx.ParseConfig(cfg.PostgresDSN)
	if err != nil {
		return fmt.Errorf("SECKILL_PG_DSN: %w", err)
	}
	if _, _, err := loopbackAddr("SECKILL_PG_DSN", net.JoinHostPort(pgc.Host, fmt.Sprint(pgc.Port))); err != nil {
		return err
	}
	if _, _, err := loopbackAddr("SECKILL_REDIS_ADDR", cfg.RedisAddr); err != nil {
		return err
	}
	if _, _, err := loopbackAddr("SECKILL_TEMPORAL_ADDR", cfg.TemporalAddress); err != nil {
		return err
	}
	for _, ns := range cfg.RocketMQNameServers {
		if _, _, err := loopbackAddr("SECKILL_ROCKETMQ_NAMESRV", ns); err != nil {
			return err
		}
	}
	if _, _, err := loopbackAddr("--broker-addr", o.BrokerAddr); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return err
	}
	runID := hex.EncodeToString(rb[:])

	// The scratch database: created as the seckill role (it has CREATEDB),
	// migrated like any seckill database, dropped at the end.
	dbName := "seckill_bench_" + runID
	dsn, err := withDBName(cfg.PostgresDSN, dbName)
	if err != nil {
		return err
	}
	adminDSN := cfg.PostgresDSN // cfg moves to the scratch database below
	if err := execAdmin(ctx, adminDSN, "CREATE DATABASE "+dbName); err != nil {
		return fmt.Errorf("create scratch database (the role needs CREATEDB): %w", err)
	}
	progress("scratch database %s created", dbName)
	if !o.Keep {
		defer func() {
			dctx, c := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer c()
			if err := execAdmin(dctx, adminDSN, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
				progress("drop scratch database %s failed: %v (drop it by hand)", dbName, err)
				return
			}
			progress("scratch database %s dropped", dbName)
		}()
	}
	if _, err := migrations.Up(ctx, dsn); err != nil {
		return fmt.Errorf("migrate %s: %w", dbName, err)
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
		return err
	}
	defer conns.Close()

	activityID := int64(900_000_000_000_000_000) + randInt63n(99_999_999_999_999_999)
	now := time.Now().UTC().Truncate(time.Second)
	act := sale.Activity{
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
			{SKUID: orderSKUReplay, Stock: sale.MaxStock, PriceCents: orderPrice},
			{SKUID: orderSKUWhatIf, Stock: sale.MaxStock, PriceCents: orderPrice},
		},
	}
	if _, err := sale.Setup(ctx, conns.Pool, conns.Redis, act); err != nil {
		return fmt.Errorf("set up bench activity: %w", err)
	}
	// Keep every send-due scanner on this Redis away from the bench's SKUs
	// (their send_due scores are a day ahead anyway).
	members := []any{skuMember(activityID, orderSKUPGBench), skuMember(activityID, orderSKUCreate), skuMember(activityID, orderSKUSagas),
		skuMember(activityID, orderSKUReplay), skuMember(activityID, orderSKUWhatIf)}
	if err := conns.Redis.SRem(ctx, lua.ActiveSKUs, members...).Err(); err != nil {
		return err
	}
	if !o.Keep {
		defer func() {
			progress("deleting the Redis keys of activity %d", activityID)
			if err := benchCleanup(context.WithoutCancel(ctx), conns.Redis, conns.Pool, activityID, act.SKUs, progress); err != nil {
				progress("clean-up failed: %v (delete keys seckill:{%d:*}:* by hand)", err, activityID)
			}
		}()
	}
	progress("activity %d: SKU %d for pgbench, %d for pgbench's replay of CreateOrder, %d for CreateOrder (stock %d each), %d for %d sagas",
		activityID, orderSKUPGBench, orderSKUReplay, orderSKUCreate, sale.MaxStock, orderSKUSagas, o.Sagas)

	rep := &OrderReport{
		Command: fmt.Sprintf("seckill bench order --concurrency %d --duration %s --sagas %d --starters %d%s%s",
			o.Concurrency, o.Duration, o.Sagas, o.Starters, map[bool]string{true: " --skip-broker"}[o.SkipBroker],
			map[bool]string{true: " --what-if"}[o.WhatIf]),
		Started: now, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), MemGiB: memTotalGiB(),
		PGBenchVersion: commandVersion(ctx, pgbPath), Database: dbName, ActivityID: activityID,
		TaskQueue: cfg.TemporalTaskQueue, Concurrency: o.Concurrency, DurationS: o.Duration.Seconds(),
	}
	_ = conns.Pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&rep.PGVersion)
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

	e := &orderEnv{o: o, cfg: cfg, conns: conns, tel: tel, rdb: conns.Redis, dsn: dsn, runID: runID, activity: activityID,
		ncpu: runtime.NumCPU(), pgbench: pgbPath, quiet: quiet, progress: progress, report: rep}
	runErr := e.run(ctx)
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

func (e *orderEnv) run(ctx context.Context) error {
	legs := []int{legBaseline, legReplay}
	if e.o.WhatIf {
		legs = append(legs, legWhatIf)
	}
	for _, kind := range legs {
		if err := e.vacuum(ctx); err != nil {
			return err
		}
		if err := e.pgbenchLeg(ctx, kind); err != nil {
			return err
		}
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
	return e.sagaLeg(ctx)
}

func (e *orderEnv) ratios() {
	r := e.report
	if r.PGBench != nil && r.CreateOrder != nil {
		r.Ratios = append(r.Ratios, NewRatio("(b) CreateOrder / (a) pgbench 4 statements (tx/s)",
			r.CreateOrder.PerS, r.PGBench.PerS, ">=", 0.80))
		if r.Replay != nil && r.Replay.PerS > 0 && r.PGBench.PerS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("for reference: (a') replay / (a) = %.2f (the transaction's shape); (b) / (a') = %.2f (the Go client's share)",
				r.Replay.PerS/r.PGBench.PerS, r.CreateOrder.PerS/r.Replay.PerS))
		}
		if r.WhatIf != nil && r.Replay != nil && r.Replay.PerS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("what-if: stock UPDATE last = %.2fx the replay, %.2f of (a); CreateOrder at (b)/(a') of it would be %.2f of (a)",
				r.WhatIf.PerS/r.Replay.PerS, r.WhatIf.PerS/r.PGBench.PerS, r.WhatIf.PerS*(r.CreateOrder.PerS/r.Replay.PerS)/r.PGBench.PerS))
		}
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
	type offPath struct {
		name string
		pct  float64
	}
	var legs []offPath
	for _, l := range []*OrderLeg{r.PGBench, r.Replay, r.WhatIf, r.CreateOrder} {
		if l != nil {
			legs = append(legs, offPath{l.Name, l.CPU.OffPathPct})
		}
	}
	if r.Broker != nil {
		legs = append(legs, offPath{"broker: produce", r.Broker.Produce.OffPathPct}, offPath{"broker: consume", r.Broker.Consume.OffPathPct})
	}
	if r.Sagas != nil && r.Sagas.DrainS > 0 {
		legs = append(legs, offPath{"(c) sagas", r.Sagas.CPU.OffPathPct})
	}
	for _, l := range legs {
		if l.pct >= 10 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: off-path work used %.0f%% of the machine during the leg; its figures are understated", l.name, l.pct))
		}
	}
}

// pgbench legs: the baseline (a), CreateOrder's statements replayed (a'),
// and the replay with the stock UPDATE last (what-if).
const (
	legBaseline = iota
	legReplay
	legWhatIf
)

// pgbenchLeg runs one pgbench leg on a hot SKU of its own.
func (e *orderEnv) pgbenchLeg(ctx context.Context, kind int) error {
	name, sku := "(a) pgbench 4 statements", orderSKUPGBench
	switch kind {
	case legReplay:
		name, sku = "(a') pgbench CreateOrder's statements", orderSKUReplay
	case legWhatIf:
		name, sku = "what-if: (a') with stock UPDATE last", orderSKUWhatIf
	}
	dir, err := os.MkdirTemp("", "seckill-bench-order-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	payload, err := sampleOutboxPayload(e.activity, sku)
	if err != nil {
		return err
	}
	hash := activities.PayloadHash(sampleMessage(e.activity, sku, 1, time.Now()))
	ps := PGBenchScript{ActivityID: e.activity, SKUID: sku, PriceCents: orderPrice,
		ConsumerGroup: activities.OrderConsumerGroup, Topic: Topic, PayloadHash: hash, OutboxPayload: payload,
		PaymentTimeoutSeconds: 900, StockLast: kind == legWhatIf}
	text, err := ps.Text()
	if kind != legBaseline {
		text, err = ps.ReplayText()
	}
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "order.sql")
	if err := os.WriteFile(script, []byte(text), 0o600); err != nil {
		return err
	}
	pgc, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		return err
	}
	args := PGBenchArgs{Path: e.pgbench, Host: pgc.Host, Port: pgc.Port, User: pgc.User, Database: pgc.Database,
		Clients: e.o.Concurrency, Threads: min(2, e.o.Concurrency), Duration: e.o.Duration, Script: script,
		LogPrefix: filepath.Join(dir, "tx")}
	argv := args.Argv()
	e.progress("%s: %s (script %s)", name, strings.Join(argv, " "), script)
	stock0, err := e.taken(ctx, sku)
	if err != nil {
		return err
	}
	pctx, c := context.WithTimeout(ctx, e.o.Duration+2*time.Minute)
	defer c()
	cmd := exec.CommandContext(pctx, argv[0], argv[1:]...) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PGPASSWORD="+pgc.Password, "PGAPPNAME="+orderAppPGBench)
	if pgc.TLSConfig == nil {
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stopWaits := e.sampleWaits(ctx, orderAppPGBench)
	w := StartCPUWindow()
	runErr := cmd.Run()
	waits := stopWaits()
	var child []ProcCPU
	if cmd.ProcessState != nil {
		child = []ProcCPU{{Name: "pgbench", Seconds: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()}}
	}
	if runErr != nil {
		return fmt.Errorf("%s: %w: %s", name, runErr, outputTail(out.String(), 800))
	}
	res, err := ParsePGBench(out.String())
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, outputTail(out.String(), 800))
	}
	cpu := w.Stop(res.Processed, e.ncpu, benchSelf, child, orderPGPath)
	var lat []time.Duration
	logs, _ := filepath.Glob(args.LogPrefix + ".*")
	for _, p := range logs {
		f, err := os.Open(p) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
		if err != nil {
			return err
		}
		l, err := ParsePGBenchLog(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", name, p, err)
		}
		lat = append(lat, l...)
	}
	stock1, err := e.taken(ctx, sku)
	if err != nil {
		return err
	}
	s := Summarize(lat)
	leg := &OrderLeg{Name: name, Ops: res.Processed, Concurrency: e.o.Concurrency, PerS: res.TPS,
		LatencyMeasured: len(lat) > 0, P50MS: MS(s.P50), P99MS: MS(s.P99), MeanMS: res.LatencyAvgMS, CPU: cpu, Waits: waits}
	if res.TPS > 0 {
		leg.ElapsedS = float64(res.Processed) / res.TPS
	}
	leg.Outcome = fmt.Sprintf("%d transactions, %d failed; stock taken %d; %d latencies logged; pgbench -M prepared -c %d -j %d -T %d",
		res.Processed, res.Failed, stock1-stock0, len(lat), args.Clients, args.Threads, int((args.Duration+time.Second-1)/time.Second))
	switch kind {
	case legReplay:
		e.report.Replay = leg
	case legWhatIf:
		e.report.WhatIf = leg
	default:
		e.report.PGBench = leg
	}
	e.progress("%s: %.0f tx/s, p50 %.2f ms, p99 %.2f ms", name, leg.PerS, leg.P50MS, leg.P99MS)
	switch {
	case res.Failed > 0:
		return fmt.Errorf("%s: %d failed transactions", name, res.Failed)
	case stock1-stock0 != res.Processed:
		// Every transaction must have taken one unit, or the baseline did less work.
		return fmt.Errorf("%s: %d transactions but %d units of stock taken", name, res.Processed, stock1-stock0)
	}
	return nil
}

// createOrderLeg is leg (b).
func (e *orderEnv) createOrderLeg(ctx context.Context) error {
	name := "(b) CreateOrder (activities)"
	c := e.o.Concurrency
	dsn, err := withAppName(e.dsn, orderAppCreate)
	if err != nil {
		return err
	}
	pool, err := pg.Open(ctx, dsn, int32(min(c, 1000))) // #nosec G115 -- bounded by min
	if err != nil {
		return err
	}
	defer pool.Close()
	verify, err := pg.Open(ctx, e.dsn, 2)
	if err != nil {
		return err
	}
	defer verify.Close()
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: verify, Redis: e.rdb, Log: e.quiet,
		Topic: Topic, TerminalTTL: benchTTL})
	if err != nil {
		return err
	}
	warm := c * 25
	n := warm + int(e.o.Duration.Seconds()*orderBuildRate)
	e.progress("%s: building %d messages (%d warm-up)", name, n, warm)
	now := time.Now()
	msgs := make([]events.OrderCreateRequested, n)
	for i := range msgs {
		msgs[i] = sampleMessage(e.activity, orderSKUCreate, int64(i+1), now)
	}
	stock0, err := e.taken(ctx, orderSKUCreate)
	if err != nil {
		return err
	}
	if r := runCreateOrders(ctx, acts, msgs[:warm], c, time.Time{}); r.bad > 0 {
		return fmt.Errorf("%s warm-up: %d unexpected results, e.g. %s", name, r.bad, strings.Join(r.samples, " | "))
	}
	e.progress("%s: %d goroutines for %s", name, c, e.o.Duration)
	stopWaits := e.sampleWaits(ctx, orderAppCreate)
	w := StartCPUWindow()
	r := runCreateOrders(ctx, acts, msgs[warm:], c, time.Now().Add(e.o.Duration))
	cpu := w.Stop(int64(r.done), e.ncpu, benchSelf, nil, orderPGPath)
	waits := stopWaits()
	stock1, err := e.taken(ctx, orderSKUCreate)
	if err != nil {
		return err
	}
	s := Summarize(r.lat)
	leg := &OrderLeg{Name: name, Ops: int64(r.done), Concurrency: c, ElapsedS: r.elapsed.Seconds(),
		LatencyMeasured: true, P50MS: MS(s.P50), P99MS: MS(s.P99), MeanMS: MS(s.Mean), CPU: cpu, Waits: waits}
	if r.elapsed > 0 {
		leg.PerS = float64(r.done) / r.elapsed.Seconds()
	}
	leg.Outcome = fmt.Sprintf("%d orders created (+%d warm-up), %d unexpected; stock taken %d; pool of %d connections",
		r.done, warm, r.bad, stock1-stock0, c)
	if r.exhausted {
		leg.Outcome += "; the pre-built messages ran out before --duration"
	}
	e.report.CreateOrder = leg
	e.progress("%s: %.0f tx/s, p50 %.2f ms, p99 %.2f ms", name, leg.PerS, leg.P50MS, leg.P99MS)
	switch {
	case r.bad > 0:
		return fmt.Errorf("%s: %d unexpected results, e.g. %s", name, r.bad, strings.Join(r.samples, " | "))
	case stock1-stock0 != int64(r.done+warm):
		return fmt.Errorf("%s: %d orders but %d units of stock taken", name, r.done+warm, stock1-stock0)
	}
	return nil
}

// application_name of the measured connections, so the wait sampler sees
// only them.
const (
	orderAppPGBench = "seckill-bench-order-pgbench"
	orderAppCreate  = "seckill-bench-order-createorder"
)

// sampleWaits samples, every 50 ms on a connection of its own, what the
// scratch database's backends of application app are doing (state and wait
// event in pg_stat_activity), until the returned function is called; that
// returns the shares. Sampling errors end it quietly (no shares).
func (e *orderEnv) sampleWaits(ctx context.Context, app string) func() []WaitShare {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		e.progress("wait sampler: %v (no wait shares)", err)
		return func() []WaitShare { return nil }
	}
	stop, done := make(chan struct{}), make(chan map[string]int, 1)
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		counts := map[string]int{}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- counts
				return
			case <-ctx.Done():
				done <- counts
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
				FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`, app)
			if err != nil {
				continue
			}
			for rows.Next() {
				var st, wt, we string
				if rows.Scan(&st, &wt, &we) == nil {
					counts[WaitState(st, wt, we)]++
				}
			}
			rows.Close()
		}
	}()
	return func() []WaitShare {
		close(stop)
		return WaitShares(<-done)
	}
}

// withAppName sets application_name in a postgres:// DSN.
func withAppName(dsn, app string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

type createOrderRun struct {
	done, bad int
	lat       []time.Duration
	elapsed   time.Duration
	exhausted bool
	samples   []string
}

// runCreateOrders calls CreateOrder on msgs from c goroutines until msgs
// run out or, if end is set, end passes. Every call must create an order.
func runCreateOrders(ctx context.Context, acts *activities.Activities, msgs []events.OrderCreateRequested, c int, end time.Time) createOrderRun {
	var next atomic.Int64
	var bad atomic.Int64
	var mu sync.Mutex
	var out createOrderRun
	lats := make([][]time.Duration, c)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, len(msgs)/c+1)
			for ctx.Err() == nil && bad.Load() < 50 {
				if !end.IsZero() && time.Now().After(end) {
					break
				}
				i := next.Add(1) - 1
				if i >= int64(len(msgs)) {
					break
				}
				t0 := time.Now()
				res, err := acts.CreateOrder(ctx, msgs[i])
				lat = append(lat, time.Since(t0))
				if err != nil || res.Outcome != activities.OutcomeCreated || res.Duplicate {
					bad.Add(1)
					mu.Lock()
					if len(out.samples) < 5 {
						out.samples = append(out.samples, fmt.Sprintf("%s %s dup=%v err=%v", res.Outcome, res.Reason, res.Duplicate, err))
					}
					mu.Unlock()
				}
			}
			lats[g] = lat
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	for _, l := range lats {
		out.lat = append(out.lat, l...)
	}
	out.bad = int(bad.Load())
	out.done = len(out.lat) - out.bad
	out.exhausted = next.Load() >= int64(len(msgs)) && !end.IsZero() && time.Now().Before(end)
	return out
}

// reserveBacklog admits leg (c)'s reservations through lua/reserve.lua, as
// the gateway does, so that the sagas' Redis projection has its hashes.
func (e *orderEnv) reserveBacklog(ctx context.Context) error {
	d, err := app.Deriver(e.cfg)
	if err != nil {
		return err
	}
	k := lua.Keys{ActivityID: e.activity, SKUID: orderSKUSagas}
	n := e.o.Sagas
	e.backlog = make([]reservation.Fields, n)
	e.progress("(c) sagas: reserving the backlog of %d in Redis (lua/reserve.lua)", n)
	t0 := time.Now()
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				user := int64(i + 1)
				req := uuid.New()
				id, err := d.ForRequest(0, e.activity, orderSKUSagas, user, req)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				nowMS := time.Now().UnixMilli()
				res, err := lua.Reserve.Run(ctx, e.rdb, []string{k.Counter(), k.Meta(), k.Reservation(id.ReservationID.String()),
					k.Request(user, req.String()), k.User(user), k.SendDue()},
					id.ReservationID.String(), id.MessageID.String(), req.String(), user, e.activity, orderSKUSagas, nowMS,
					id.KeyVersion, ids.SchemaVersion, benchTTL.Milliseconds(), nowMS+24*time.Hour.Milliseconds()).Slice()
				if err == nil && (len(res) < 3 || res[0] != int64(1)) {
					err = fmt.Errorf("reserve user %d: %v", user, res)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				e.backlog[i] = reservation.Fields{ReservationID: id.ReservationID, MessageID: id.MessageID, RequestID: req,
					ActivityID: e.activity, SKUID: orderSKUSagas, UserID: user, SchemaVersion: ids.SchemaVersion,
					KeyVersion: id.KeyVersion, ReservedAtMS: nowMS, DeadlineMS: res[2].(int64)}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("reserve backlog: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.report.Sagas = &SagaLeg{Sagas: n, Starters: e.o.Starters, ReserveS: time.Since(t0).Seconds()}
	return nil
}

// orderBenchGroup is the consumer group of the broker leg: one group for
// every run (each run reads its own topic from the first offset).
const orderBenchGroup = "seckill-bench-order"

// brokerLeg sends the backlog's messages with the gateway's send code
// (reservation.Send) to a topic of this run, created on the broker for the
// leg and deleted after it, then consumes them back with the project's
// consumer (mq.NewConsumer, as the saga starter does) and a handler that
// only counts. A topic of its own is the only way a consumer reads just
// this run's messages: a new group on a shared topic starts at the topic's
// first offset (the whole history), whatever the start position asked for.
func (e *orderEnv) brokerLeg(ctx context.Context) error {
	n := len(e.backlog)
	topic := "seckill_bench_order_" + e.runID
	leg := &BrokerLeg{Messages: n, Producers: e.o.Concurrency, ConsumerConcurrency: e.cfg.ConsumerConcurrency,
		Group: orderBenchGroup + " on topic " + topic}
	e.report.Broker = leg
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(e.cfg.RocketMQNameServers)))
	if err != nil {
		return fmt.Errorf("broker: admin client: %w", err)
	}
	defer adm.Close()
	cctx, c := context.WithTimeout(ctx, 15*time.Second)
	err = adm.CreateTopic(cctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(e.o.BrokerAddr),
		admin.WithReadQueueNums(8), admin.WithWriteQueueNums(8))
	c()
	if err != nil {
		return fmt.Errorf("broker: create topic %s on %s (--broker-addr, or --skip-broker): %w", topic, e.o.BrokerAddr, err)
	}
	defer func() {
		dctx, c := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer c()
		if err := adm.DeleteTopic(dctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(e.o.BrokerAddr),
			admin.WithNameSrvAddr(e.cfg.RocketMQNameServers)); err != nil {
			e.progress("broker: delete topic %s: %v (delete it with mqadmin deleteTopic)", topic, err)
			return
		}
		e.progress("broker: topic %s deleted", topic)
	}()
	// Probe until the new topic's route reaches the producer.
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, c := context.WithTimeout(ctx, 5*time.Second)
		_, err := e.conns.Producer.Send(pctx, mq.Message{Topic: topic, Key: "bench-probe", ID: uuid.NewString(),
			Tag: "BENCH_PROBE", Body: []byte(`{"bench_probe":true}`)})
		c()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("broker: topic %s never became writable: %w", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	e.progress("broker: sending %d ORDER_CREATE_REQUESTED to %s from %d goroutines", n, topic, e.o.Concurrency)
	w := StartCPUWindow()
	t0 := time.Now()
	var next, failed atomic.Int64
	var sample atomic.Value
	var wg sync.WaitGroup
	for range e.o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if outcome, text := reservation.Send(ctx, e.conns.Producer, topic, e.backlog[i]); outcome != reservation.OutcomePublished {
					failed.Add(1)
					sample.Store(outcome + ": " + text)
				}
			}
		}()
	}
	wg.Wait()
	leg.ProduceS = time.Since(t0).Seconds()
	leg.ProducePS = float64(n) / leg.ProduceS
	leg.Produce = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderBrokerPath)
	if f := failed.Load(); f > 0 {
		leg.Outcome = fmt.Sprintf("%d of %d sends failed", f, n)
		return fmt.Errorf("broker: %d of %d sends failed, e.g. %v", f, n, sample.Load())
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.progress("broker: sent %d in %.1f s (%.0f/s); consuming them back (group %s)", n, leg.ProduceS, leg.ProducePS, orderBenchGroup)

	want := make(map[string]int, n)
	for i, f := range e.backlog {
		want[f.MessageID.String()] = i
	}
	seen := make([]atomic.Bool, n)
	var got, dup, foreign atomic.Int64
	all := make(chan struct{})
	var allOnce sync.Once
	cons, err := mq.NewConsumer(e.cfg.RocketMQNameServers, orderBenchGroup, topic, func(_ context.Context, d mq.Delivered) error {
		i, ok := want[d.ID]
		switch {
		case !ok:
			foreign.Add(1) // the probe
		case seen[i].Swap(true):
			dup.Add(1)
		default:
			if got.Add(1) == int64(n) {
				allOnce.Do(func() { close(all) })
			}
		}
		return nil
	}, mq.ConsumerOptions{Concurrency: e.cfg.ConsumerConcurrency})
	if err != nil {
		return fmt.Errorf("broker: consumer: %w", err)
	}
	w = StartCPUWindow()
	t1 := time.Now()
	if err := cons.Start(); err != nil {
		return fmt.Errorf("broker: start consumer: %w", err)
	}
	defer func() {
		if err := cons.Close(); err != nil {
			e.progress("broker: consumer close: %v", err)
		}
	}()
	last, lastAt := int64(0), time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if g := got.Load(); g != last {
				last, lastAt = g, time.Now()
			} else if time.Since(lastAt) > time.Minute {
				leg.Outcome = fmt.Sprintf("consumed %d of %d, then nothing for a minute", g, n)
				return fmt.Errorf("broker: %s", leg.Outcome)
			}
		}
	}
	leg.ConsumeS = time.Since(t1).Seconds()
	leg.ConsumePS = float64(n) / leg.ConsumeS
	leg.Consume = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderBrokerPath)
	leg.Outcome = fmt.Sprintf("sent %d (all PUBLISHED), received %d once each (%d redeliveries, %d probe); the consume time includes the consumer's start and first rebalance",
		n, got.Load(), dup.Load(), foreign.Load())
	e.progress("broker: consumed %d in %.1f s (%.0f/s)", n, leg.ConsumeS, leg.ConsumePS)
	return nil
}

// sagaLeg is leg (c).
func (e *orderEnv) sagaLeg(ctx context.Context) error {
	leg := e.report.Sagas
	n := len(e.backlog)
	st, err := sagastarter.New(e.conns.Pool, e.conns.Temporal, e.cfg.TemporalTaskQueue, prometheus.NewRegistry(), e.quiet)
	if err != nil {
		return err
	}
	bodies := make([][]byte, n)
	for i, f := range e.backlog {
		if bodies[i], err = json.Marshal(f.Message()); err != nil {
			return err
		}
	}

	// The saga worker, composed like `seckill worker --parts saga`.
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	werr := make(chan error, 1)
	go func() {
		werr <- app.RunWorkers(wctx, e.cfg, e.conns, []string{app.PartSaga}, e.tel, &failpoint.Set{}, e.quiet)
	}()
	defer func() {
		stopWorker()
		select {
		case <-werr:
		case <-time.After(30 * time.Second):
			e.progress("(c) sagas: worker did not stop within 30 s")
		}
	}()
	// Terminate the sagas that were started: they wait for payment.
	defer e.terminateSagas(ctx)
	select { // let the worker's pollers come up; not part of the drain
	case err := <-werr:
		return fmt.Errorf("saga worker: %w", err)
	case <-time.After(2 * time.Second):
	}

	e.progress("(c) sagas: starting %d sagas on task queue %s from %d goroutines (saga starter code)", n, e.cfg.TemporalTaskQueue, e.o.Starters)
	w := StartCPUWindow()
	t0 := time.Now()
	var next, started, failed atomic.Int64
	var sample atomic.Value
	startsDone := make(chan struct{})
	var startWG sync.WaitGroup
	for range e.o.Starters {
		startWG.Add(1)
		go func() {
			defer startWG.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f := e.backlog[i]
				d := mq.Delivered{Topic: Topic, Key: f.ReservationID.String(), Tag: "ORDER_CREATE_REQUESTED",
					ID: f.MessageID.String(), Body: bodies[i], BrokerMsgID: "bench-" + f.MessageID.String()}
				var err error
				for attempt := 0; attempt < 5; attempt++ { // a redelivery, as the broker would
					if err = st.Handle(ctx, d); err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				if err != nil {
					failed.Add(1)
					sample.Store(err.Error())
					continue
				}
				started.Add(1)
				e.mu.Lock()
				e.startedIDs = append(e.startedIDs, workflows.ReservationWorkflowID(f.ReservationID.String()))
				e.mu.Unlock()
			}
		}()
	}
	var startS atomic.Int64
	go func() {
		startWG.Wait()
		startS.Store(int64(time.Since(t0)))
		close(startsDone)
	}()

	k := lua.Keys{ActivityID: e.activity, SKUID: orderSKUSagas}
	var at []float64
	var done []int64
	var created, projected, other int64
	var createdAt time.Duration
	lastProgress, lastChange, lastCreated := time.Now(), time.Now(), int64(-1)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			leg.Outcome = fmt.Sprintf("stopped by the timeout: %d of %d orders created, %d projected", created, n, projected)
			return fmt.Errorf("(c) sagas: %s", leg.Outcome)
		case err := <-werr:
			return fmt.Errorf("(c) sagas: worker stopped: %v", err)
		case <-tick.C:
		}
		var err error
		created, other, err = e.reservationCounts(ctx)
		if err != nil {
			return err
		}
		vals, err := e.rdb.HMGet(ctx, k.Counter(), "committed").Result()
		if err != nil {
			return err
		}
		projected = toInt64(vals[0])
		el := time.Since(t0)
		at, done = append(at, el.Seconds()), append(done, created)
		if created == int64(n) && createdAt == 0 {
			createdAt = el
		}
		if created != lastCreated {
			lastCreated, lastChange = created, time.Now()
		}
		if f := failed.Load(); f > 0 {
			select {
			case <-startsDone:
				leg.Outcome = fmt.Sprintf("%d of %d starts failed", f, n)
				return fmt.Errorf("(c) sagas: %d of %d starts failed, e.g. %v", f, n, sample.Load())
			default:
			}
		}
		if created == int64(n) && projected >= int64(n) {
			break
		}
		if other > 0 {
			leg.Outcome = fmt.Sprintf("%d reservations ended in another status than ORDER_CREATED", other)
			return fmt.Errorf("(c) sagas: %s (see inventory_reservation in %s)", leg.Outcome, e.report.Database)
		}
		if time.Since(lastChange) > orderStall {
			leg.Outcome = fmt.Sprintf("no order created for %s: %d of %d created, %d started", orderStall, created, n, started.Load())
			return fmt.Errorf("(c) sagas: %s", leg.Outcome)
		}
		if time.Since(lastProgress) >= 5*time.Second {
			e.progress("(c) sagas: t=%.0fs started %d, orders created %d, projected %d of %d", el.Seconds(), started.Load(), created, projected, n)
			lastProgress = time.Now()
		}
	}
	drain := time.Since(t0)
	<-startsDone
	leg.CPU = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderSagaPath)
	leg.StartS = time.Duration(startS.Load()).Seconds()
	leg.StartsPS = float64(n) / leg.StartS
	leg.CreatedS, leg.DrainS = createdAt.Seconds(), drain.Seconds()
	leg.SagasPS = float64(n) / leg.DrainS
	leg.Milestones, leg.SteadyPS = Milestones(at, done, int64(n))
	leg.Outcome = fmt.Sprintf("%d reserved in Redis in %.1f s (not timed); %d sagas started in %.1f s; all %d orders created after %.1f s and projected (committed %d, open_reserved 0) after %.1f s; milestones %s",
		n, leg.ReserveS, started.Load(), leg.StartS, n, leg.CreatedS, projected, leg.DrainS, milestoneText(leg.Milestones))
	e.progress("(c) sagas: drained %d in %.1f s: %.1f sagas/s (steady %.1f/s), starts %.0f/s", n, leg.DrainS, leg.SagasPS, leg.SteadyPS, leg.StartsPS)
	open, err := e.rdb.HGet(ctx, k.Counter(), "open_reserved").Int64()
	if err != nil {
		return err
	}
	if open != 0 {
		return fmt.Errorf("(c) sagas: Redis open_reserved is %d after the drain, want 0", open)
	}
	return nil
}

// terminateSagas ends the started sagas (they wait for payment) from a
// bounded pool; it runs even after a failure or the timeout. Each is deleted
// (DeleteWorkflowExecution terminates a running workflow, then removes its
// history and visibility record), so a run does not leave 10,000 histories
// in the Temporal server's database for the namespace's retention; where
// deletion is refused it is terminated.
func (e *orderEnv) terminateSagas(ctx context.Context) {
	e.mu.Lock()
	wids := append([]string(nil), e.startedIDs...)
	e.mu.Unlock()
	if len(wids) == 0 {
		return
	}
	tctx, c := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer c()
	e.progress("(c) sagas: deleting (terminating) %d sagas", len(wids))
	t0 := time.Now()
	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(wids) {
					return
				}
				_, err := e.conns.Temporal.WorkflowService().DeleteWorkflowExecution(tctx, &workflowservice.DeleteWorkflowExecutionRequest{
					Namespace: e.cfg.TemporalNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wids[i]}})
				if err != nil && !isNotFound(err) {
					err = e.conns.Temporal.TerminateWorkflow(tctx, wids[i], "", "seckill bench order: measured; clean-up")
				}
				var nf *serviceerror.NotFound
				if err == nil || errors.As(err, &nf) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if leg := e.report.Sagas; leg != nil {
		leg.TerminateS, leg.Terminated = time.Since(t0).Seconds(), int(ok.Load())
	}
	e.progress("(c) sagas: deleted %d in %.1f s (%d failed)", ok.Load(), time.Since(t0).Seconds(), failed.Load())
	if failed.Load() > 0 {
		e.report.Notes = append(e.report.Notes, fmt.Sprintf("%d sagas could not be terminated: they cancel themselves when their payment timer fires (15 min)", failed.Load()))
	}
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// vacuum runs VACUUM on sku_inventory between the PostgreSQL legs, so that
// every leg starts from the same state: the legs' hot SKU rows share one
// heap page, and the tens of thousands of updates of one leg would leave
// dead row versions there for the next leg to step over. The other tables
// are left alone: vacuuming (or analyzing) a table while it is still empty
// records 0 rows in its statistics, and the prepared statements' generic
// plans then scan it sequentially as it grows during the leg.
func (e *orderEnv) vacuum(ctx context.Context) error {
	_, err := e.conns.Pool.Exec(ctx, `VACUUM sku_inventory`)
	if err != nil {
		return fmt.Errorf("vacuum between legs: %w", err)
	}
	return nil
}

// reservationCounts counts leg (c)'s reservations in PostgreSQL: created
// orders, and any that ended otherwise (rejected, compensated, manual).
func (e *orderEnv) reservationCounts(ctx context.Context) (created, other int64, err error) {
	err = e.conns.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'ORDER_CREATED'),
		       count(*) FILTER (WHERE status NOT IN ('ORDER_CREATED', 'RESERVED'))
		FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2`, e.activity, orderSKUSagas).Scan(&created, &other)
	return created, other, err
}

// taken is the stock taken from a SKU so far (initial - available).
func (e *orderEnv) taken(ctx context.Context, sku int64) (int64, error) {
	var n int64
	err := e.conns.Pool.QueryRow(ctx, `SELECT initial_stock - available_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = $2`,
		e.activity, sku).Scan(&n)
	return n, err
}

// sampleMessage is an ORDER_CREATE_REQUESTED as the gateway builds it, with
// random ids (CreateOrder needs only PostgreSQL: no Redis reservation).
func sampleMessage(activityID, skuID, userID int64, now time.Time) events.OrderCreateRequested {
	return reservation.Fields{ReservationID: uuid.New(), MessageID: uuid.New(), RequestID: uuid.New(),
		ActivityID: activityID, SKUID: skuID, UserID: userID, SchemaVersion: ids.SchemaVersion, KeyVersion: 1,
		ReservedAtMS: now.UnixMilli(), DeadlineMS: now.Add(time.Hour).UnixMilli()}.Message()
}

// sampleOutboxPayload is an ORDER_CREATED payload as CreateOrder writes it
// (outbox.Insert adds event_id, event_type, schema_version).
func sampleOutboxPayload(activityID, skuID int64) ([]byte, error) {
	oid, rid := uuid.New(), uuid.New()
	p := map[string]any{"order_id": oid, "reservation_id": rid, "activity_id": activityID, "sku_id": skuID,
		"user_id": int64(123456789), "amount_cents": orderPrice, "expires_at": time.Now().Add(15 * time.Minute),
		"event_id": outbox.EventID("ORDER_CREATED", oid), "event_type": "ORDER_CREATED", "schema_version": 1}
	return json.Marshal(p)
}

func milestoneText(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"10%", "50%", "90%", "100%"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1fs", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func toInt64(v any) int64 {
	var n int64
	if s, ok := v.(string); ok {
		_, _ = fmt.Sscan(s, &n)
	}
	return n
}

func randInt63n(n int64) int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	v := int64(0)
	for _, x := range b {
		v = v<<8 | int64(x)
	}
	if v < 0 {
		v = -(v + 1)
	}
	return v % n
}

// withDBName returns dsn with its database replaced.
func withDBName(dsn, db string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("SECKILL_PG_DSN must be a postgres:// URL for the scratch database: %v", err)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// execAdmin runs one statement on a fresh connection to dsn.
func execAdmin(ctx context.Context, dsn, sql string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, sql)
	return err
}

// findPGBench resolves --pgbench: the given path, else pgbench on PATH, else
// the newest Debian/Ubuntu PostgreSQL installation's.
func findPGBench(flag string) (string, error) {
	if flag != "" {
		p, err := exec.LookPath(flag)
		if err != nil {
			return "", fmt.Errorf("--pgbench %s: %w", flag, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	best, bestVer := "", -1
	for _, p := range found {
		var v int
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(filepath.Dir(p))), &v); err == nil && v > bestVer {
			best, bestVer = p, v
		}
	}
	if best == "" {
		return "", errors.New("pgbench not found on PATH or in /usr/lib/postgresql/*/bin: pass --pgbench")
	}
	return best, nil
}

// commandVersion is the first line of `path --version`.
func commandVersion(ctx context.Context, path string) string {
	vctx, c := context.WithTimeout(ctx, 5*time.Second)
	defer c()
	out, err := exec.CommandContext(vctx, path, "--version").Output()
	if err != nil {
		return filepath.Base(path) + " (version unknown)"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func outputTail(s string, n int) string {
	if len(s) <= n {
		return strings.TrimSpace(s)
	}
	return "..." + strings.TrimSpace(s[len(s)-n:])
}
