package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/tools/bench"
)

func newBenchOrderCmd() *cobra.Command {
	o := bench.OrderOptions{}
	cmd := &cobra.Command{
		Use:   "order",
		Short: "PostgreSQL order transaction: pgbench baseline vs CreateOrder, and sagas/s from a backlog",
		Long: `Creates a scratch database seckill_bench_<random> (migrated, dropped at the end) with one
activity, and measures in one run:

  (a) pgbench        pgbench -n -M prepared -c C -j 2 -T D with tools/bench/order_baseline.sql,
                     the four statements of the baseline (inbox INSERT ON CONFLICT, conditional
                     stock UPDATE, order INSERT ON CONFLICT, outbox INSERT) on one hot SKU
  (b) CreateOrder    activities.Activities.CreateOrder called directly (no Temporal) by C
                     goroutines for D on distinct pre-built ORDER_CREATE_REQUESTED messages,
                     another hot SKU
  broker             the N messages of (c) sent by the gateway's send code to a topic of this
                     run (created on --broker-addr, deleted after), then consumed back by the
                     project's consumer (group seckill-bench-order) (--skip-broker skips it)
  (c) sagas          N reservations admitted by lua/reserve.lua in Redis (the backlog), then
                     started by the saga starter's code (sagastarter.Starter.Handle: inbox row +
                     ExecuteWorkflow) from --starters goroutines while an in-process saga worker
                     (app/, part "saga", its own task queue) runs them; drained = every
                     order created in PostgreSQL and projected onto Redis
  (d) plain          the baseline of (c) on the same server: N plain workflows of the saga's
                     forward shape (one activity with one PostgreSQL INSERT, one with one Redis
                     write, then a wait for a signal or the payment timer) on a task queue of
                     their own with their own worker in this process (--skip-plain skips it)

and prints tx/s with p50/p99, the ratio b/a against its target (>= 1.00), sagas/s, the ratio
c/d against its target (>= 1.5) and the drain time of a 10,000 backlog (<= 120 s; extrapolated
from the rate when --sagas is another size). The sagas then wait for payment; the bench terminates them. At the end the
activity's Redis keys are deleted and the scratch database is dropped (--keep leaves both).
Progress goes to stderr; the report to stdout (--json for machine-readable).`,
		Args: cobra.NoArgs,
		RunE: benchRunE(&o, nil, bench.RunOrder),
	}
	f := cmd.Flags()
	f.IntVar(&o.Concurrency, "concurrency", 8, "pgbench clients and CreateOrder goroutines (C); also the broker leg's producers")
	f.DurationVar(&o.Duration, "duration", 20*time.Second, "duration of legs (a) and (b) (D; pgbench -T rounds up to whole seconds)")
	f.IntVar(&o.Sagas, "sagas", 10_000, "reservations in the backlog of leg (c) (N)")
	f.IntVar(&o.Starters, "starters", 16, "concurrent saga starts in leg (c) (the starter's consumer concurrency is 16)")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	f.StringVar(&o.PGBench, "pgbench", "", "pgbench executable (default: pgbench on PATH, else /usr/lib/postgresql/<newest>/bin/pgbench)")
	f.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "bound on the whole run (clean-up has its own minutes)")
	f.BoolVar(&o.SkipBroker, "skip-broker", false, "skip the RocketMQ produce/consume leg")
	f.StringVar(&o.BrokerAddr, "broker-addr", "127.0.0.1:10911", "RocketMQ broker address: the broker leg creates (and deletes) a topic of its own there")
	f.DurationVar(&o.WaitIdle, "wait-idle", 0, "before starting, wait up to this long for the machine to be under 20% busy (shared machines)")
	f.BoolVar(&o.Keep, "keep", false, "keep the scratch database and the activity's Redis keys")
	f.BoolVar(&o.SkipPlain, "skip-plain", false, "skip leg (d), the plain workflows (the baseline of the sagas)")
	return cmd
}
