package reservation_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/procfs"

	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
)

// BenchmarkReserveBuckets measures the gateway's admission code (Reserve:
// reserve.lua, then the batched send marks) on one hot SKU whose stock is
// split into B buckets, for each B of SECKILL_BENCH_BUCKETS (1,2,4), with the
// on-demand moves between buckets (refill=true, the default) and without,
// on the Redis the config names: the single one, or a Redis Cluster, where
// the buckets land on different masters (docs/scale.md). Each op is a new
// buyer's Reserve, from 32 goroutines per GOMAXPROCS; a publisher that
// accepts every message stands in for the broker. The stock equals b.N, so
// every answer but QUEUED is a false sold-out. Besides ns/op (the inverse
// of reservations/s) it reports false-sold-out, refills (the moves between
// buckets), p50/p99 of one Reserve call, this process's CPU per op
// (gateway-µs/op) and the CPU per op of every redis-server process on this
// machine together (redis-µs/op) and of the busiest one.
//
//	SECKILL_INTEGRATION=1 SECKILL_ENV=development go test -run '^$' -bench ReserveBuckets -benchtime 100000x ./internal/reservation
func BenchmarkReserveBuckets(b *testing.B) {
	cfg := testenv.Require(b)
	rdb := testenv.Redis(b, cfg)
	d := testenv.Deriver(b, cfg)
	for _, n := range benchBuckets(b) {
		for _, refill := range []bool{true, false} {
			b.Run(fmt.Sprintf("B=%d/refill=%v", n, refill), func(b *testing.B) {
				stock := make([]int64, n)
				for i := range stock {
					stock[i] = int64(b.N / n)
				}
				stock[0] += int64(b.N % n)
				k := testenv.BucketSale(b, rdb, stock...)
				m := metrics.NewReservation(prometheus.NewRegistry())
				res, err := reservation.NewReserver(rdb, d, acceptAll{}, reservation.Options{Topic: "bench-buckets",
					SendTimeout: time.Second, SendDueDelay: time.Minute, ReservationTTL: time.Hour, SoldOutMemo: cfg.SoldOutMemo,
					Linger: cfg.SendLinger, NoRefill: !refill}, m, nil, logx.New(io.Discard, "error"))
				if err != nil {
					b.Fatal(err)
				}
				defer res.Close()
				var user, other atomic.Int64
				var mu sync.Mutex
				var lat []time.Duration
				ctx := context.Background()
				redis0, self0 := redisServerSeconds(b), selfSeconds()
				b.SetParallelism(32)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						t0 := time.Now()
						r, err := res.Reserve(ctx, user.Add(1), k.ActivityID, k.SKUID, uuid.New())
						mine = append(mine, time.Since(t0))
						if err != nil || r.Code != reservation.Queued {
							other.Add(1)
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				redis1, self1 := redisServerSeconds(b), selfSeconds()
				var total, busiest float64
				for pid, s := range redis1 {
					total += s - redis0[pid]
					busiest = max(busiest, s-redis0[pid])
				}
				slices.Sort(lat)
				perOp := func(s float64) float64 { return 1e6 * s / float64(b.N) }
				b.ReportMetric(perOp(total), "redis-µs/op")
				b.ReportMetric(perOp(busiest), "busiest-redis-µs/op")
				b.ReportMetric(perOp(self1-self0), "gateway-µs/op")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(other.Load()), "false-sold-out")
				b.ReportMetric(testutil.ToFloat64(m.Refills.WithLabelValues("moved")), "refills")
			})
		}
	}
}

// benchBuckets is SECKILL_BENCH_BUCKETS, bucket counts from 1 to 64.
func benchBuckets(b *testing.B) []int {
	v := cmp.Or(os.Getenv("SECKILL_BENCH_BUCKETS"), "1,2,4")
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			b.Fatalf("SECKILL_BENCH_BUCKETS=%q: want bucket counts between 1 and 64, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

// redisServerSeconds is the CPU time of each redis-server process on this
// machine, by pid.
func redisServerSeconds(b *testing.B) map[int]float64 {
	b.Helper()
	procs, err := procfs.AllProcs()
	if err != nil {
		b.Fatal(err)
	}
	out := map[int]float64{}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.Comm == "redis-server" {
			out[p.PID] = st.CPUTime()
		}
	}
	return out
}

// selfSeconds is this process's CPU time (the gateway's code and the bench's
// goroutines).
func selfSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// acceptAll is a publisher that accepts every message: the broker is not
// part of the bench.
type acceptAll struct{}

func (acceptAll) Send(context.Context, mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, nil
}
func (acceptAll) SendBatch(context.Context, []mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, nil
}
