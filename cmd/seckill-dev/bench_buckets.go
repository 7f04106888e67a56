package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/tools/bench"
)

func newBenchBucketsCmd() *cobra.Command {
	o := bench.BucketsOptions{}
	cmd := &cobra.Command{
		Use:   "buckets",
		Short: "Admission on one hot SKU split into B Redis stock buckets, for each B (single Redis or Redis Cluster)",
		Long: `For each bucket count B of --buckets, sets up a scratch activity with one SKU of --requests
units split into B buckets (docs/scale.md) and admits --requests distinct users through the
gateway's admission code (reservation.Reserver: reserve.lua, then the batched send marks) from
--concurrency goroutines. The broker is left out: a publisher that accepts every message at
once stands in for it. Reports reservations/s, p50/p99 of one Reserve call, this process's CPU
and each redis-server process's CPU, as % of one core.

Against a Redis Cluster (SECKILL_REDIS_CLUSTER_ADDRS, e.g. after SECKILL_REDIS=cluster make up)
the buckets land on different masters, so the table shows how one hot SKU spreads. The
activity's keys and rows are deleted after each case.`,
		Args: cobra.NoArgs,
		RunE: benchRunE(&o, nil, bench.RunBuckets),
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Buckets, "buckets", []int{1, 2, 4}, "bucket counts to measure, one case each")
	f.IntVar(&o.Requests, "requests", 100_000, "reservations per case")
	f.IntVar(&o.Concurrency, "concurrency", 64, "concurrent Reserve calls")
	f.BoolVar(&o.JSON, "json", false, "print the report as JSON")
	f.DurationVar(&o.Timeout, "timeout", 20*time.Minute, "bound on the whole run")
	f.BoolVar(&o.NoRefill, "no-refill", false, "without the gateway's on-demand moves between buckets (the false SOLD_OUT baseline)")
	return cmd
}
