package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/tools/bench"
)

func newBenchAllCmd() *cobra.Command {
	o := bench.AllOptions{}
	r, d := &o.Reserve, &o.Order
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Every leg of `bench reserve` and `bench order` (sagas and plain workflows too) in one run, one table",
		Long: `Runs, in sequence on the local stack, the legs of "seckill bench reserve" (raw EVALSHA,
HTTP in-stock and sold-out driven by wrk, the fixed-rate case at
half the peak) and of "seckill bench order" (pgbench, CreateOrder, the broker, (c) sagas from a
backlog and (d) as many plain Temporal workflows of the saga's shape), and prints one table:
leg, this project, the baseline measured in the same run, ratio, target, met.

Before the first leg, and before the order legs, (c) and (d), it samples /proc/stat for 2 s:
if other work (everything but this process) keeps the machine more than --max-busy busy
(the stack idles at 5-10%), it waits up to --wait-idle (first leg) or --settle (later legs)
and then refuses to measure, unless --force: then every figure is flagged "busy".
A default run takes about 6 minutes. Progress goes to stderr, the table to stdout
(--json: everything, both full reports included; --details: both full reports as text).`,
		Args: cobra.NoArgs,
		RunE: benchRunE(&o, &timeout, bench.RunAll),
	}
	f := cmd.Flags()
	f.IntVar(&r.Requests, "requests", 100_000, "reserve: requests per measured case")
	f.IntVar(&r.Concurrency, "concurrency", 50, "reserve: concurrent clients (redis-benchmark -c, HTTP connections)")
	f.IntVar(&r.Warmup, "warmup", 2000, "reserve: unmeasured HTTP requests before each HTTP case")
	f.StringVar(&r.Wrk, "wrk", "wrk", "wrk executable")
	f.DurationVar(&r.FixedRateDuration, "fixed-rate-duration", 20*time.Second, "reserve: length of the fixed-rate case at half the peak (0 skips it)")
	f.StringVar(&r.Topic, "topic", bench.Topic, "reserve: RocketMQ topic of the in-process gateway")
	f.StringVar(&r.RedisBenchmark, "redis-benchmark", "redis-benchmark", "redis-benchmark executable")
	f.IntVar(&d.Concurrency, "order-concurrency", 8, "order: pgbench clients and CreateOrder goroutines")
	f.DurationVar(&d.Duration, "duration", 20*time.Second, "order: duration of legs (a) and (b)")
	f.IntVar(&d.Sagas, "sagas", 2000, "order: reservations in the backlog of leg (c), and plain workflows in leg (d)")
	f.IntVar(&d.Starters, "starters", 16, "order: concurrent saga (and plain workflow) starts")
	f.BoolVar(&d.SkipBroker, "skip-broker", false, "order: skip the RocketMQ produce/consume leg")
	f.StringVar(&d.PGBench, "pgbench", "", "pgbench executable (default: pgbench on PATH, else the newest PostgreSQL's)")
	f.StringVar(&d.BrokerAddr, "broker-addr", "127.0.0.1:10911", "RocketMQ broker address of the broker leg")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	f.BoolVar(&o.Details, "details", false, "print both full reports after the table")
	f.BoolVar(&o.Force, "force", false, "run on a busy machine; every figure is then flagged busy")
	f.Float64Var(&o.MaxBusyPct, "max-busy", 25, "share of the machine (%, all CPUs) other work may use before a leg")
	f.DurationVar(&o.Settle, "settle", time.Minute, "before each later leg, wait up to this long for the machine to quieten")
	f.DurationVar(&o.WaitIdle, "wait-idle", 0, "before the first leg, wait up to this long for the machine to be idle")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "bound on the whole run")
	f.DurationVar(&r.Timeout, "reserve-timeout", 10*time.Minute, "bound on the reserve legs")
	f.DurationVar(&d.Timeout, "order-timeout", 20*time.Minute, "bound on the order legs")
	return cmd
}
