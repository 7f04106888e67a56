package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/lua"
)

// raw runs redis-benchmark EVALSHA of reserve.lua against one SKU.
func (e *benchEnv) raw(ctx context.Context, stock string, sku int64) error {
	name := "raw EVALSHA " + stock
	now := time.Now()
	call := ReserveCall{SHA: lua.ReserveSHA(), ActivityID: e.activity, SKUID: sku, NowMS: now.UnixMilli(),
		KeyVersion: e.keyVer, SchemaVersion: ids.SchemaVersion, TTL: benchTTL,
		SendDueAtMS: now.Add(24 * time.Hour).UnixMilli()}
	e.progress("%s: redis-benchmark -c %d -n %d -r %d --csv EVALSHA %s 6 ...", name, e.o.Concurrency, e.o.Requests,
		MaxKeySpace, call.SHA)
	calls0, failed0, err := e.evalshaStats(ctx)
	if err != nil {
		return err
	}
	reserved0, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	s0, err := e.sample(ctx)
	if err != nil {
		return err
	}
	rr, err := e.rb.Run(ctx, call.Args())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s1, err := e.sample(ctx)
	if err != nil {
		return err
	}
	calls1, failed1, err := e.evalshaStats(ctx)
	if err != nil {
		return err
	}
	reserved1, err := e.reservedTotal(ctx, sku)
	if err != nil {
		return err
	}
	reserved := reserved1 - reserved0
	c := Case{Name: name, Path: "raw", Stock: stock, Loadgen: "redis-benchmark", Requests: e.o.Requests, Concurrency: e.o.Concurrency,
		ElapsedS: rr.Elapsed.Seconds(), RPS: rr.Row.RPS, Reservations: reserved,
		P50MS: rr.Row.P50MS, P99MS: rr.Row.P99MS, LatencyMeasured: rr.Row.HasLatency,
	}
	c.account(s0, s1, e.ncpu, e.o.Requests, "redis-benchmark", rr.CPU)
	// redis-benchmark's rps is requests over its own timer; the admitted
	// share of them runs at the same rate.
	c.ReservationsPS = rr.Row.RPS * float64(reserved) / float64(e.o.Requests)
	c.Outcome = fmt.Sprintf("reserved %d of %d; server EVALSHA calls +%d, failed +%d (all clients)%s",
		reserved, e.o.Requests, calls1-calls0, failed1-failed0, snapshots(c.RedisSnapshots))
	e.report.Cases = append(e.report.Cases, c)
	e.progress("%s: %.0f req/s, p50 %.3f ms, p99 %.3f ms; %s", name, c.RPS, c.P50MS, c.P99MS, c.Outcome)

	// redis-benchmark does not report error replies: check the server saw
	// the calls succeed and the script did what the case says.
	switch {
	case failed1 != failed0:
		return fmt.Errorf("%s: %d EVALSHA calls failed on the server (NOSCRIPT? wrong arguments?)", name, failed1-failed0)
	case calls1-calls0 < int64(e.o.Requests):
		return fmt.Errorf("%s: the server counted %d EVALSHA calls, want at least %d", name, calls1-calls0, e.o.Requests)
	case stock == "in-stock" && reserved < int64(e.o.Requests)-collisionAllowance(e.o.Requests):
		return fmt.Errorf("%s: only %d of %d calls reserved", name, reserved, e.o.Requests)
	case stock == "sold-out" && reserved != 0:
		return fmt.Errorf("%s: %d calls reserved on the sold-out SKU", name, reserved)
	}
	return nil
}

// collisionAllowance bounds the raw in-stock calls that may not reserve: a
// few random ids collide (__rand_int__ draws from MaxKeySpace values), and
// such a call answers ALREADY_RESERVED (user guard) or DUPLICATE_REQUEST
// (reservation key). Expected: about n²/(2K) per key kind, two kinds.
func collisionAllowance(n int) int64 {
	expected := float64(n) * float64(n) / float64(MaxKeySpace)
	return int64(3*expected) + 10
}

func (e *benchEnv) evalshaStats(ctx context.Context) (calls, failed int64, err error) {
	info, err := e.rdb.InfoMap(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("redis INFO commandstats: %w", err)
	}
	calls, failed = CommandStat(info["Commandstats"]["cmdstat_evalsha"])
	return calls, failed, nil
}
