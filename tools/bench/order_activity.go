package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/state/steps"
)

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
				if err != nil || res.Outcome != steps.OutcomeCreated || res.Duplicate {
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
