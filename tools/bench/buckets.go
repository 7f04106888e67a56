package bench

// `seckill-dev bench buckets`: the gateway's admission path (reservation.Reserver:
// reserve.lua, then the batched send marks) on one hot SKU whose Redis stock
// is split into B buckets, for each B asked, on whatever Redis the config
// names (a single Redis or Redis Cluster). The broker is left out: a
// publisher that accepts every message at once stands in for it, so the
// figures are the Redis side and the gateway's Go code. Each case reports
// reservations/s, p50/p99 of one Reserve call, and each redis-server
// process's share of a core.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/procfs"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
)

// BucketsOptions are the settings of `seckill-dev bench buckets`.
type BucketsOptions struct {
	Buckets     []int
	Requests    int // reservations per case (each admitted: the stock is this large)
	Concurrency int
	JSON        bool
	Timeout     time.Duration
	// NoRefill measures without the gateway's on-demand moves between
	// buckets (SECKILL_RESERVE_REFILL=false): the false SOLD_OUT baseline.
	NoRefill bool
}

// Validate checks the options' bounds.
func (o BucketsOptions) Validate() error {
	switch {
	case len(o.Buckets) == 0:
		return errors.New("--buckets must list at least one bucket count")
	case o.Requests < 100 || o.Requests > benchMaxRequests:
		return fmt.Errorf("--requests must be between 100 and %d", benchMaxRequests)
	case o.Concurrency < 1 || o.Concurrency > benchMaxConcurrency:
		return fmt.Errorf("--concurrency must be between 1 and %d", benchMaxConcurrency)
	case o.Timeout <= 0 || o.Timeout > time.Hour:
		return errors.New("--timeout must be positive and at most 1h")
	}
	for _, b := range o.Buckets {
		if b < 1 || b > 64 {
			return fmt.Errorf("--buckets: %d is not between 1 and 64", b)
		}
	}
	return nil
}

// BucketsReport is the outcome of every case.
type BucketsReport struct {
	Redis    string        `json:"redis"` // "single" or "cluster of N"
	NCPU     int           `json:"ncpu"`
	Cases    []BucketsCase `json:"cases"`
	Failures []string      `json:"failures,omitempty"`
}

// BucketsCase is one bucket count's figures.
type BucketsCase struct {
	Buckets  int   `json:"buckets"`
	Admitted int64 `json:"admitted"`
	// Other is every answer other than QUEUED. The stock equals the requests,
	// so each is a false SOLD_OUT (a dry bucket while another had units) or an error.
	Other int64 `json:"other"`
	// Refill says whether the gateway moved stock on demand; RefillsMoved and
	// RefillUnits are its moves and the units they moved.
	Refill       bool          `json:"refill"`
	RefillsMoved int64         `json:"refills_moved"`
	RefillUnits  int64         `json:"refill_units"`
	Seconds      float64       `json:"seconds"`
	PerSec       float64       `json:"reservations_per_s"`
	P50          time.Duration `json:"p50_ns"`
	P99          time.Duration `json:"p99_ns"`
	// RedisCorePct is each redis-server process's CPU over the case, in % of
	// one core, by its address.
	RedisCorePct map[string]float64 `json:"redis_core_pct"`
	// GatewayCorePct is this process's (the gateway's) CPU, % of one core.
	GatewayCorePct float64 `json:"gateway_core_pct"`
	// RedisUSPerOp and GatewayUSPerOp are CPU per admitted reservation, µs
	// of one core: all redis-server processes together, and this process.
	RedisUSPerOp   float64 `json:"redis_us_per_reservation"`
	GatewayUSPerOp float64 `json:"gateway_us_per_reservation"`
}

// acceptAll is a publisher that accepts every message: the broker is not
// part of this bench.
type acceptAll struct{}

func (acceptAll) Send(context.Context, mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, nil
}
func (acceptAll) SendBatch(context.Context, []mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, nil
}

// RunBuckets runs `seckill-dev bench buckets`.
func RunBuckets(ctx context.Context, sys config.Config, o BucketsOptions, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	progress := progressTo(stderr, "bench: ")
	cfg := sys
	cfg.ReservationTTL = benchTTL
	conns, err := app.Open(ctx, cfg, "seckill-bench-buckets", false, logx.New(stderr, "warn"), nil)
	if err != nil {
		return err
	}
	defer conns.Close()
	rep := &BucketsReport{Redis: redisKind(cfg), NCPU: runtime.NumCPU()}
	for _, b := range o.Buckets {
		c, err := bucketsCase(ctx, cfg, conns, o, b, progress)
		if err != nil {
			rep.Failures = append(rep.Failures, fmt.Sprintf("B=%d: %v", b, err))
			continue
		}
		rep.Cases = append(rep.Cases, c)
	}
	return writeReport(stdout, o.JSON, rep, rep.WriteText, &rep.Failures)
}

func bucketsCase(ctx context.Context, cfg config.Config, conns *app.Conns, o BucketsOptions, buckets int,
	progress func(string, ...any)) (BucketsCase, error) {
	now := time.Now().UTC()
	activityID := int64(900_000_000_000_000_000) + rand.Int64N(99_999_999_999_999_999) // #nosec G404 -- non-cryptographic randomness: a scratch activity id, never a secret
	skus := []sale.SKU{{SKUID: 1, Stock: int64(o.Requests), Buckets: buckets}}
	a := sale.Activity{ActivityID: activityID, Name: fmt.Sprintf("seckill bench buckets B=%d", buckets),
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 600, SKUs: skus}
	if _, err := sale.Setup(ctx, conns.Pool, conns.Redis, a); err != nil {
		return BucketsCase{}, fmt.Errorf("set up: %w", err)
	}
	defer func() {
		if err := benchCleanup(context.WithoutCancel(ctx), conns.Redis, conns.Pool, activityID, skus, progress); err != nil {
			progress("clean-up of activity %d: %v", activityID, err)
		}
	}()
	d, err := app.Deriver(cfg)
	if err != nil {
		return BucketsCase{}, err
	}
	m := metrics.NewReservation(prometheus.NewRegistry())
	res, err := reservation.NewReserver(conns.Redis, d, acceptAll{}, reservation.Options{Topic: "bench-buckets",
		SendTimeout: time.Second, SendDueDelay: time.Minute, ReservationTTL: benchTTL, SoldOutMemo: cfg.SoldOutMemo,
		Linger: cfg.SendLinger, NoRefill: o.NoRefill}, m, nil, logx.New(io.Discard, "error"))
	if err != nil {
		return BucketsCase{}, err
	}
	defer res.Close()
	progress("B=%d: %d reservations from %d goroutines on activity %d", buckets, o.Requests, o.Concurrency, activityID)
	c, err := driveBuckets(ctx, res, activityID, o, buckets)
	c.Refill = !o.NoRefill
	c.RefillsMoved = int64(testutil.ToFloat64(m.Refills.WithLabelValues("moved")))
	c.RefillUnits = int64(testutil.ToFloat64(m.RefillUnits))
	return c, err
}

func driveBuckets(ctx context.Context, res *reservation.Reserver, activityID int64, o BucketsOptions, buckets int) (BucketsCase, error) {
	var next, admitted, other atomic.Int64
	lat := make([][]time.Duration, o.Concurrency)
	before, selfBefore := redisServerTicks(), selfTicks()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				u := next.Add(1)
				if u > int64(o.Requests) {
					return
				}
				t0 := time.Now()
				r, err := res.Reserve(ctx, u, activityID, 1, uuid.New())
				lat[g] = append(lat[g], time.Since(t0))
				if err == nil && r.Code == reservation.Queued {
					admitted.Add(1)
				} else {
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, selfAfter := redisServerTicks(), selfTicks()
	all := slices.Concat(lat...)
	slices.Sort(all)
	c := BucketsCase{Buckets: buckets, Admitted: admitted.Load(), Other: other.Load(), Seconds: elapsed.Seconds(),
		PerSec: float64(admitted.Load()) / elapsed.Seconds(), P50: Percentile(all, 0.50), P99: Percentile(all, 0.99),
		RedisCorePct:   map[string]float64{},
		GatewayCorePct: 100 * float64(selfAfter-selfBefore) / ClockTicks / elapsed.Seconds()}
	var redisTicks uint64
	for name, t := range after {
		c.RedisCorePct[name] = 100 * float64(t-before[name]) / ClockTicks / elapsed.Seconds()
		redisTicks += t - before[name]
	}
	if n := float64(c.Admitted); n > 0 {
		c.RedisUSPerOp = float64(redisTicks) / ClockTicks / n * 1e6
		c.GatewayUSPerOp = float64(selfAfter-selfBefore) / ClockTicks / n * 1e6
	}
	return c, ctx.Err()
}

// redisServerTicks is the CPU ticks of every redis-server process on this
// machine, by the address in its process title ("redis-server 127.0.0.1:17001 [cluster]").
func redisServerTicks() map[string]uint64 {
	out := map[string]uint64{}
	for pid, p := range ReadProcTicks() {
		if p.Name != "redis-server" {
			continue
		}
		addr := fmt.Sprint(pid)
		if proc, err := procfs.NewProc(pid); err == nil {
			if title, _ := proc.CmdLine(); len(strings.Fields(strings.Join(title, " "))) > 1 {
				addr = strings.Fields(strings.Join(title, " "))[1]
			}
		}
		out[addr] += p.Ticks
	}
	return out
}

func selfTicks() uint64 { return ReadProcTicks()[os.Getpid()].Ticks }

func redisKind(cfg config.Config) string {
	if n := len(cfg.RedisClusterAddrs); n > 0 {
		return fmt.Sprintf("cluster (%d seeds)", n)
	}
	return "single " + cfg.RedisAddr
}

// WriteText prints the report as a table.
func (r *BucketsReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "seckill bench buckets: admission on one hot SKU split into B buckets, Redis %s, %d CPUs (no broker)\n", r.Redis, r.NCPU)
	fmt.Fprintf(w, "(stock = requests, so every SOLD_OUT is false: a bucket ran dry while another had units; no rebalancer runs;\n")
	fmt.Fprintf(w, " refill: the gateway's on-demand moves, their count and units)\n")
	fmt.Fprintf(w, "%-4s %10s %14s %14s %14s %9s %9s %9s %11s %11s  %s\n", "B", "admitted", "false sold out", "refill (units)", "reservations/s",
		"p50", "p99", "gateway%", "gw µs/op", "redis µs/op", "redis-server % of a core")
	for _, c := range r.Cases {
		names := make([]string, 0, len(c.RedisCorePct))
		for n := range c.RedisCorePct {
			names = append(names, n)
		}
		slices.Sort(names)
		var shares []string
		for _, n := range names {
			shares = append(shares, fmt.Sprintf("%s %.0f", n, c.RedisCorePct[n]))
		}
		refill := "off"
		if c.Refill {
			refill = fmt.Sprintf("%d (%d)", c.RefillsMoved, c.RefillUnits)
		}
		fmt.Fprintf(w, "%-4d %10d %14d %14s %14.0f %9s %9s %9.0f %11.1f %11.1f  %s\n", c.Buckets, c.Admitted, c.Other, refill, c.PerSec,
			c.P50.Round(time.Microsecond), c.P99.Round(time.Microsecond), c.GatewayCorePct, c.GatewayUSPerOp, c.RedisUSPerOp,
			strings.Join(shares, ", "))
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED %s\n", f)
	}
}
