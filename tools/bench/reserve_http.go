package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
)

// httpCase is one HTTP case: its gateway, SKU and the answer it expects.
type httpCase struct {
	name, stock string
	sku         int64
	gw          *benchGateway
	wantStatus  int
	wantCode    []byte
	keys        []string // Idempotency-Key of user i+1
}

// httpCounts are the case's counters read before and after the load.
type httpCounts struct {
	reserved   int64
	memo, pub  float64
	sample     CPUSample
	sendDueLen int64
}

// http drives the in-process gateway's reserve endpoint for one SKU.
func (e *benchEnv) http(ctx context.Context, gw *benchGateway, stock string, sku int64) error {
	hc := &httpCase{name: "HTTP " + stock + gw.label, stock: stock, sku: sku, gw: gw,
		wantStatus: http.StatusAccepted, wantCode: []byte(`"QUEUED"`)}
	if stock == "sold-out" {
		hc.wantStatus, hc.wantCode = http.StatusConflict, []byte(`"SOLD_OUT"`)
	}
	total := e.o.Warmup + e.o.Requests
	hc.keys = make([]string, total)
	for i := range hc.keys {
		hc.keys[i] = uuid.NewString()
	}
	name := hc.name
	if e.o.Warmup > 0 {
		e.progress("%s: warm-up, %d requests (users 1..%d)", name, e.o.Warmup, e.o.Warmup)
		w := e.load(ctx, hc, 0, e.o.Warmup, " warm-up")
		if w.Unexpected > 0 || w.Stopped != "" {
			return fmt.Errorf("%s warm-up: %d unexpected answers (%s) %s; e.g. %s", name, w.Unexpected,
				StatusText(w.Status), w.Stopped, strings.Join(w.Samples, " | "))
		}
	}
	before, err := e.httpCounts(ctx, hc, false)
	if err != nil {
		return err
	}
	var stopProfile func()
	if e.o.CPUProfile != "" {
		stopProfile, err = startProfile(fmt.Sprintf("%s-http-%s%s.pprof", e.o.CPUProfile, stock, map[bool]string{true: "-no-limits"}[gw.label != ""]))
		if err != nil {
			return err
		}
		defer func() {
			if stopProfile != nil {
				stopProfile()
			}
		}()
	}
	e.progress("%s: %d requests, %d workers (users %d..%d)", name, e.o.Requests, e.o.Concurrency, e.o.Warmup+1, total)
	if before.sample, err = e.sample(ctx); err != nil {
		return err
	}
	lr := e.load(ctx, hc, e.o.Warmup, e.o.Requests, "")
	// The gateway answers before it sends (it batches its sends): the case
	// ends when the last queued message is published, and that tail counts.
	if stock == "in-stock" {
		drainStart := time.Now()
		for deadline := drainStart.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if int(publishedByGateway(gw)-before.pub) >= lr.Expected {
				break
			}
		}
		lr.Elapsed += time.Since(drainStart)
	}
	s1, err := e.sample(ctx)
	if err != nil {
		return err
	}
	if stopProfile != nil {
		stopProfile()
		stopProfile = nil
	}
	after, err := e.httpCounts(ctx, hc, true)
	if err != nil {
		return err
	}
	after.sample = s1
	return e.httpResult(hc, lr, before, after)
}

// load runs n requests of the case from request offset on (users
// offset+1..offset+n), as the load generator (profile label role=loadgen).
func (e *benchEnv) load(ctx context.Context, hc *httpCase, offset, n int, label string) LoadResult {
	l := Load{Client: e.client, Method: http.MethodPost, URL: hc.gw.url(e.activity, hc.sku), Requests: n, Concurrency: e.o.Concurrency,
		Header: func(i int, h http.Header) {
			h["Authorization"] = []string{e.bearer[offset+i]}
			h["Idempotency-Key"] = []string{hc.keys[offset+i]}
		},
		Expect: func(status int, body []byte) bool {
			return status == hc.wantStatus && bytes.Contains(body, hc.wantCode)
		},
		ProgressEvery: 5 * time.Second,
		Progress: func(done int, el time.Duration) {
			e.progress("%s%s: %d/%d (%.0f/s)", hc.name, label, done, n, float64(done)/el.Seconds())
		},
	}
	var out LoadResult
	pprof.Do(ctx, pprof.Labels("role", "loadgen"), func(ctx context.Context) { out = l.Run(ctx) })
	return out
}

// publishedByGateway is the gateway's count of messages it published.
func publishedByGateway(gw *benchGateway) float64 {
	return counterValue(gw.reg, "seckill_reservation_send_total", map[string]string{"source": "gateway", "result": reservation.OutcomePublished})
}

// httpCounts reads the SKU's reserved_total and the gateway's counters
// (after the load also the send_due backlog).
func (e *benchEnv) httpCounts(ctx context.Context, hc *httpCase, withSendDue bool) (httpCounts, error) {
	var c httpCounts
	var err error
	if c.reserved, err = e.reservedTotal(ctx, hc.sku); err != nil {
		return c, err
	}
	c.memo = counterValue(hc.gw.reg, "seckill_reserve_sold_out_memo_total", nil)
	c.pub = publishedByGateway(hc.gw)
	if withSendDue {
		c.sendDueLen, err = e.rdb.ZCard(ctx, lua.Keys{ActivityID: e.activity, SKUID: hc.sku}.SendDue()).Result()
	}
	return c, err
}

// httpResult records the case in the report and checks it did what it says.
func (e *benchEnv) httpResult(hc *httpCase, lr LoadResult, before, after httpCounts) error {
	name, stock := hc.name, hc.stock
	memo, pub := after.memo-before.memo, after.pub-before.pub
	lat := Summarize(lr.Latencies)
	reserved := after.reserved - before.reserved
	c := Case{Name: name, Path: "http", Stock: stock, Requests: lr.Requests, Concurrency: e.o.Concurrency,
		ElapsedS: lr.Elapsed.Seconds(), Reservations: reserved,
		P50MS: MS(lat.P50), P99MS: MS(lat.P99), LatencyMeasured: true,
	}
	s0, s1 := before.sample, after.sample
	use, procs := Use(s0, s1, e.ncpu, 0), ProcDelta(s0.Procs, s1.Procs)
	c.CPU = Cost(use, lr.Requests, e.ncpu)
	c.TopProcesses = topProcs(use, procs, lr.Requests)
	c.OtherWorkPct = otherWork(use, procs, e.ncpu)
	c.RedisSnapshots = s1.AOFRewrites - s0.AOFRewrites
	if lr.Elapsed > 0 {
		c.RPS = float64(lr.Requests) / lr.Elapsed.Seconds()
		c.ReservationsPS = float64(reserved) / lr.Elapsed.Seconds()
	}
	c.Outcome = fmt.Sprintf("HTTP %s; reserved %d", StatusText(lr.Status), reserved)
	if stock == "in-stock" {
		c.Outcome += fmt.Sprintf("; published to %s by the gateway %.0f, send_due left %d", e.o.Topic, pub, after.sendDueLen)
	} else {
		c.Outcome += fmt.Sprintf("; answered from the sold-out memo %.0f, by the script %.0f", memo, float64(lr.Expected)-memo)
	}
	c.Outcome += snapshots(c.RedisSnapshots)
	e.report.Cases = append(e.report.Cases, c)
	e.progress("%s: %.0f req/s, p50 %.3f ms, p99 %.3f ms; %s", name, c.RPS, c.P50MS, c.P99MS, c.Outcome)

	switch {
	case lr.Unexpected > 0 || lr.Stopped != "" || lr.Requests != e.o.Requests:
		return fmt.Errorf("%s: %d unexpected answers of %d (want HTTP %d %s; got %s) %s; e.g. %s", name, lr.Unexpected,
			lr.Requests, hc.wantStatus, hc.wantCode, StatusText(lr.Status), lr.Stopped, strings.Join(lr.Samples, " | "))
	case stock == "in-stock" && reserved != int64(e.o.Requests):
		return fmt.Errorf("%s: %d answers QUEUED but Redis admitted %d", name, lr.Expected, reserved)
	case stock == "in-stock" && int64(pub) < reserved: // (warm-up sends may land inside the case)
		// A failed send is cheaper than a stored one: the figures would not
		// measure the path.
		return fmt.Errorf("%s: the gateway published %.0f of %d messages to %s", name, pub, reserved, e.o.Topic)
	case stock == "sold-out" && reserved != 0:
		return fmt.Errorf("%s: %d reservations on the sold-out SKU", name, reserved)
	}
	return nil
}

func (e *benchEnv) reservedTotal(ctx context.Context, sku int64) (int64, error) {
	n, err := e.rdb.HGet(ctx, lua.Keys{ActivityID: e.activity, SKUID: sku}.Counter(), "reserved_total").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}
