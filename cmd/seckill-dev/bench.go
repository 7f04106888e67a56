package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/cmd/internal/cli"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/tools/bench"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure the hot path on this machine (docs/benchmarks.md)"}
	cmd.AddCommand(newBenchReserveCmd())
	cmd.AddCommand(newBenchOrderCmd())
	cmd.AddCommand(newBenchAllCmd())
	return cmd
}

func newBenchReserveCmd() *cobra.Command {
	o := bench.ReserveOptions{}
	cmd := &cobra.Command{
		Use:   "reserve",
		Short: "Raw EVALSHA of lua/reserve.lua (redis-benchmark) vs the gateway's HTTP reserve endpoint",
		Long: `Creates a throw-away activity (random id) with an in-stock SKU for each path and a
sold-out SKU, then measures in one run:

  raw EVALSHA in-stock / sold-out   redis-benchmark -c C -n N EVALSHA <reserve.lua sha> 7 ...,
                                    every call a distinct random user (__rand_int__)
  HTTP in-stock / sold-out          an in-process gateway composed like "seckill api"
                                    (app/: real Reserver, Redis, RocketMQ producer) on a
                                    free 127.0.0.1 port, driven by C keep-alive connections
                                    of wrk (its own process, tools/bench/wrk.lua), N requests,
                                    each a distinct user with its own token and
                                    Idempotency-Key; the rate limits on (set too high to
                                    trip, so every request is counted)
  HTTP sold-out (no limits)         the same on a second gateway without rate limits: the
                                    cost of the limits on the cheapest path
  HTTP in-stock @ half peak         HTTP in-stock once more, paced at half the in-stock rate
                                    just measured, for --fixed-rate-duration: p99 < 5 ms?

and prints requests/s, reservations/s, p50/p90/p99 latency, CPU per request (the
gateway's alone) and the HTTP/raw ratios against the targets (in-stock >= 0.60,
sold-out > 1). In-stock
HTTP reservations send real ORDER_CREATE_REQUESTED messages, by default to the
topic seckill_bench_create that no saga starter reads (--topic). At the end the
activity's Redis keys and PostgreSQL rows are deleted (--keep leaves them).
Progress goes to stderr; the report to stdout (--json for machine-readable).`,
		Args: cobra.NoArgs,
		RunE: benchRunE(&o, nil, bench.RunReserve),
	}
	f := cmd.Flags()
	f.IntVar(&o.Requests, "requests", 100_000, "requests per measured case (N)")
	f.IntVar(&o.Concurrency, "concurrency", 50, "concurrent clients: redis-benchmark -c and HTTP workers (C)")
	f.IntVar(&o.Warmup, "warmup", 2000, "unmeasured HTTP requests before each HTTP case (connections, MQ route, sold-out memo)")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	f.StringVar(&o.RedisBenchmark, "redis-benchmark", "redis-benchmark", "redis-benchmark executable")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "bound on the whole run (clean-up has its own 2 minutes)")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write CPU profiles of the HTTP cases to PREFIX-http-in-stock.pprof, PREFIX-http-sold-out.pprof and PREFIX-http-sold-out-no-limits.pprof (samples labelled role=gateway)")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench activity's Redis keys and PostgreSQL rows")
	f.StringVar(&o.Topic, "topic", bench.Topic, "RocketMQ topic the in-process gateway sends ORDER_CREATE_REQUESTED to (seckill_order_create feeds the saga starter)")
	f.DurationVar(&o.WaitIdle, "wait-idle", 0, "before starting, wait up to this long for the machine to be under 20% busy (shared machines)")
	f.StringVar(&o.Wrk, "wrk", "wrk", "wrk executable")
	f.DurationVar(&o.FixedRateDuration, "fixed-rate-duration", 20*time.Second, "length of the fixed-rate case (HTTP in-stock paced at half the peak in-stock rate, for its p99); 0 skips it")
	return cmd
}

// benchRunE is the RunE of every bench command: validate the flags' options,
// load the configuration, run the bench (within *timeout when given).
func benchRunE[O interface{ Validate() error }](o *O, timeout *time.Duration,
	run func(context.Context, config.Config, O, io.Writer, io.Writer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := (*o).Validate(); err != nil {
			return err
		}
		b, err := cli.LoadBase()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if timeout != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		return run(ctx, b.Cfg, *o, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
}
