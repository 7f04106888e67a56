package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
)

// httpCase is one HTTP case: its gateway, SKU, load generator and the
// answer it expects.
type httpCase struct {
	name, stock string
	sku         int64
	gw          *benchGateway
	rate        float64 // requests/s of a fixed-rate case; 0: closed loop
	requests    int     // measured requests (after the warm-up)
	wantStatus  int
	wantCode    []byte
}

// httpCounts are the case's counters read before and after the load.
type httpCounts struct {
	reserved   int64
	memo, pub  float64
	served     int64
	sample     CPUSample
	sendDueLen int64
	sendDueNow int64 // send_due members still due for a (re)send
}

// driven is what one wrk run measured.
type driven struct {
	Requests   int           // answers
	Expected   int           // answers with the expected status and code
	Unexpected int           // other answers and socket errors
	Status     map[int]int   // answers by HTTP status
	Samples    []string      // examples of unexpected answers
	Elapsed    time.Duration // the gateway's first request to its last answer
	Stopped    string        // why the run ended early, if it did
	lat        Latency
	loadgenCPU time.Duration // the external load generator's CPU (wrk)
	p90        time.Duration
}

// newHTTPCase names the case and sets the answer it expects.
func newHTTPCase(gw *benchGateway, stock string, sku int64, suffix string, requests int) *httpCase {
	hc := &httpCase{name: "HTTP " + stock + gw.label + suffix, stock: stock, sku: sku, gw: gw, requests: requests,
		wantStatus: http.StatusAccepted, wantCode: []byte(`"QUEUED"`)}
	if stock == "sold-out" {
		hc.wantStatus, hc.wantCode = http.StatusConflict, []byte(`"SOLD_OUT"`)
	}
	return hc
}

// http drives the in-process gateway's reserve endpoint for one case: the
// warm-up (users 1..W), then the measured requests (users W+1..W+n).
func (e *benchEnv) http(ctx context.Context, hc *httpCase) error {
	total := e.o.Warmup + hc.requests
	name := hc.name
	if e.o.Warmup > 0 {
		e.progress("%s: warm-up, %d requests (users 1..%d, wrk)", name, e.o.Warmup, e.o.Warmup)
		w := e.drive(ctx, hc, 0, e.o.Warmup, 0)
		if w.Unexpected > 0 || w.Stopped != "" || w.Requests != e.o.Warmup {
			return fmt.Errorf("%s warm-up: %d of %d answered, %d unexpected (%s) %s; e.g. %s", name, w.Requests, e.o.Warmup,
				w.Unexpected, StatusText(w.Status), w.Stopped, strings.Join(w.Samples, " | "))
		}
	}
	before, err := e.httpCounts(ctx, hc, false)
	if err != nil {
		return err
	}
	stopProfile, err := e.profile(hc)
	if err != nil {
		return err
	}
	defer stopProfile()
	pace := "closed loop"
	if hc.rate > 0 {
		pace = fmt.Sprintf("paced at %.0f/s", hc.rate)
	}
	e.progress("%s: %d requests, %d connections, wrk, %s (users %d..%d)", name, hc.requests, e.o.Concurrency, pace, e.o.Warmup+1, total)
	if before.sample, err = e.sample(ctx); err != nil {
		return err
	}
	lr := e.drive(ctx, hc, e.o.Warmup, hc.requests, hc.rate)
	// The gateway answers before it sends (it batches its sends): the case
	// ends when the last queued message is published, and that tail counts.
	if hc.stock == "in-stock" {
		drainStart := time.Now()
		for deadline := drainStart.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if int(publishedByGateway(hc.gw)-before.pub) >= lr.Expected {
				break
			}
		}
		lr.Elapsed += time.Since(drainStart)
	}
	s1, err := e.sample(ctx)
	if err != nil {
		return err
	}
	stopProfile()
	after, err := e.httpCounts(ctx, hc, true)
	if err != nil {
		return err
	}
	after.sample = s1
	return e.httpResult(hc, lr, before, after)
}

// profile starts the case's CPU profile if --cpuprofile asks for one; the
// returned function stops it (once).
func (e *benchEnv) profile(hc *httpCase) (func(), error) {
	if e.o.CPUProfile == "" {
		return func() {}, nil
	}
	name := strings.NewReplacer(" ", "-", "(", "", ")", "", "[", "", "]", "", ",", "", "@", "").Replace(strings.ToLower(hc.name))
	stop, err := startProfile(fmt.Sprintf("%s-%s.pprof", e.o.CPUProfile, name))
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(stop) }, nil
}

// drive runs n requests of the case with wrk from request offset on (users
// offset+1..offset+n), paced at rate if positive; the elapsed time is the
// gateway's: the first request's arrival to the last answer.
func (e *benchEnv) drive(ctx context.Context, hc *httpCase, offset, n int, rate float64) driven {
	tokens := e.tokens[offset : offset+n]
	threads := min(e.ncpu, e.o.Concurrency)
	if e.o.Concurrency%threads != 0 {
		threads = 1
	}
	served0 := hc.gw.win.served.Load()
	hc.gw.win.reset()
	run := WrkRun{Path: e.wrk, URL: hc.gw.url(e.activity, hc.sku), Threads: threads, Connections: e.o.Concurrency,
		Tokens: tokens, Rate: rate, WantStatus: hc.wantStatus, WantCode: strings.Trim(string(hc.wantCode), `"`),
		Served: hc.gw.win.served.Load, StallAfter: 15 * time.Second,
		Progress: func(served int64, el time.Duration) {
			e.progress("%s: %d/%d (%.0f/s)", hc.name, served-served0, n, float64(served-served0)/el.Seconds())
		}}
	wr, err := run.Run(ctx)
	d := driven{Requests: int(wr.Answered), Expected: int(wr.Expected), Unexpected: int(wr.Unexpected),
		Status: wr.Status, Samples: wr.Samples, Elapsed: hc.gw.win.elapsed(), Stopped: wr.Stopped,
		lat:        Latency{P50: usDur(wr.P50US), P99: usDur(wr.P99US), Max: usDur(wr.MaxUS), Mean: time.Duration(wr.MeanUS * 1e3)},
		p90:        usDur(wr.P90US),
		loadgenCPU: wr.CPU}
	if err != nil {
		d.Stopped = strings.TrimSpace(d.Stopped + " " + err.Error())
	}
	if se := wr.SocketErrors(); se > 0 {
		d.Unexpected += int(se)
		d.Samples = append(d.Samples, fmt.Sprintf("wrk socket errors %v", wr.Errors))
	}
	if served := hc.gw.win.served.Load() - served0; served != int64(n) {
		d.Stopped = strings.TrimSpace(fmt.Sprintf("%s the gateway answered %d requests, wrk counted %d, want %d", d.Stopped, served, wr.Answered, n))
	}
	return d
}

func usDur(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// StatusText renders status counts as "202×99000 409×1000".
func StatusText(m map[int]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d×%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// publishedByGateway is the gateway's count of messages it published.
func publishedByGateway(gw *benchGateway) float64 {
	return counterValue(gw.reg, "seckill_reservation_send_total", map[string]string{"source": "gateway", "result": reservation.OutcomePublished})
}

// httpCounts reads the SKU's reserved_total and the gateway's counters
// (after the load also the send_due backlog: after an in-stock case it waits
// up to 10 s for the gateway's pipelined send marks).
func (e *benchEnv) httpCounts(ctx context.Context, hc *httpCase, after bool) (httpCounts, error) {
	var c httpCounts
	var err error
	if c.reserved, err = e.reservedTotal(ctx, hc.sku); err != nil {
		return c, err
	}
	c.memo = counterValue(hc.gw.reg, "seckill_reserve_sold_out_memo_total", nil)
	c.pub = publishedByGateway(hc.gw)
	c.served = hc.gw.win.served.Load()
	if !after {
		return c, nil
	}
	key := lua.Keys{ActivityID: e.activity, SKUID: hc.sku}.SendDue()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// A published reservation stays in send_due, rescheduled to its
		// recheck (deadline + 1 min, 10+ minutes ahead): only members due
		// sooner still wait for a (re)send.
		soon := strconv.FormatInt(time.Now().Add(5*time.Minute).UnixMilli(), 10)
		if c.sendDueNow, err = e.rdb.ZCount(ctx, key, "-inf", soon).Result(); err != nil || c.sendDueNow == 0 || time.Now().After(deadline) {
			break
		}
	}
	if err == nil {
		c.sendDueLen, err = e.rdb.ZCard(ctx, key).Result()
	}
	return c, err
}

// httpResult records the case in the report and checks it did what it says.
func (e *benchEnv) httpResult(hc *httpCase, lr driven, before, after httpCounts) error {
	name, stock := hc.name, hc.stock
	memo, pub := after.memo-before.memo, after.pub-before.pub
	reserved := after.reserved - before.reserved
	c := Case{Name: name, Path: "http", Stock: stock, Loadgen: LoadGenWrk, TargetRPS: hc.rate, Requests: lr.Requests, Concurrency: e.o.Concurrency,
		ElapsedS: lr.Elapsed.Seconds(), Reservations: reserved,
		P50MS: MS(lr.lat.P50), P90MS: MS(lr.p90), P99MS: MS(lr.lat.P99), MaxMS: MS(lr.lat.Max), LatencyMeasured: true,
	}
	c.account(before.sample, after.sample, e.ncpu, lr.Requests, "wrk", lr.loadgenCPU)
	c.GatewayUS = c.CPU.SelfUS
	if lr.Elapsed > 0 {
		c.RPS = float64(lr.Requests) / lr.Elapsed.Seconds()
		c.ReservationsPS = float64(reserved) / lr.Elapsed.Seconds()
	}
	c.Outcome = fmt.Sprintf("wrk: HTTP %s, gateway answered %d; reserved %d", StatusText(lr.Status), after.served-before.served, reserved)
	if stock == "in-stock" {
		c.Outcome += fmt.Sprintf("; published to %s by the gateway %.0f; send_due %d, all rescheduled to their recheck but %d",
			e.o.Topic, pub, after.sendDueLen, after.sendDueNow)
	} else {
		c.Outcome += fmt.Sprintf("; answered from the sold-out memo %.0f, by the script %.0f", memo, float64(lr.Expected)-memo)
	}
	c.Outcome += snapshots(c.RedisSnapshots)
	e.report.Cases = append(e.report.Cases, c)
	e.progress("%s: %.0f req/s, p50 %.3f ms, p99 %.3f ms; %s", name, c.RPS, c.P50MS, c.P99MS, c.Outcome)

	switch {
	case lr.Unexpected > 0 || lr.Stopped != "" || lr.Requests != hc.requests || after.served-before.served != int64(hc.requests):
		return fmt.Errorf("%s: %d unexpected answers of %d (want %d answers HTTP %d %s; got %s) %s; e.g. %s", name, lr.Unexpected,
			lr.Requests, hc.requests, hc.wantStatus, hc.wantCode, StatusText(lr.Status), lr.Stopped, strings.Join(lr.Samples, " | "))
	case stock == "in-stock" && reserved != int64(hc.requests):
		return fmt.Errorf("%s: %d answers QUEUED but Redis admitted %d", name, lr.Expected, reserved)
	case stock == "in-stock" && int64(pub) < reserved: // (warm-up sends may land inside the case)
		// A failed send is cheaper than a stored one: the figures would not
		// measure the path.
		return fmt.Errorf("%s: the gateway published %.0f of %d messages to %s", name, pub, reserved, e.o.Topic)
	case stock == "in-stock" && after.sendDueNow != 0:
		return fmt.Errorf("%s: %d reservations still due for a send in send_due (their send was not recorded as published)", name, after.sendDueNow)
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
