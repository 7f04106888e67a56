package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/senddue"
)

// downBroker is a broker that refuses every send (an outage); flip up to
// let sends through.
type downBroker struct{ sent []mq.Message }

func (b *downBroker) Send(context.Context, mq.Message) (mq.SendResult, error) {
	return mq.SendResult{}, errors.New("connect 127.0.0.1:10911: connection refused")
}

func (b *downBroker) SendBatch(ctx context.Context, msgs []mq.Message) (mq.SendResult, error) {
	return b.Send(ctx, mq.Message{})
}

// A broker outage longer than any send budget: the gateway answered QUEUED,
// every send fails. No reservation is given up (it stays due, re-sent at a
// capped backoff, with the oldest-unsent age growing); past its business
// deadline reconciliation records its durable rejection in PostgreSQL (the
// reservation was never there), gives the unit back once, frees the user to
// try again, and the message that finally arrives creates no order.
func TestBrokerOutageNeverGivesUpAndIsRejectedAfterTheDeadline(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	// A short order deadline so the test can pass it.
	if err := r.rdb.HSet(ctx, r.k.Meta(), "order_deadline_ms", 1500).Err(); err != nil {
		t.Fatal(err)
	}
	m := metrics.NewReservation(prometheus.NewRegistry())
	broker := &downBroker{}
	res, err := reservation.NewReserver(r.rdb, r.ids, broker, reservation.Options{Topic: "t", SendTimeout: time.Second,
		SendDueDelay: time.Millisecond, RetryBackoff: time.Millisecond, ReservationTTL: time.Hour, SoldOutMemo: time.Millisecond},
		m, &failpoint.Set{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	const buyers = 3
	var rids []uuid.UUID
	for u := int64(1); u <= buyers; u++ {
		out, err := res.Reserve(ctx, u, r.k.ActivityID, r.k.SKUID, uuid.New())
		if err != nil || out.Code != reservation.Queued {
			t.Fatalf("reserve user %d = %+v, %v", u, out, err)
		}
		rids = append(rids, out.ReservationID)
	}
	// Only this test's scanner may see the SKU (scanners of other tests on
	// this Redis would send its reservations to the real broker).
	member := fmt.Sprintf("%d:%d", r.k.ActivityID, r.k.SKUID)
	own := "seckill:test:active_skus:" + member
	r.rdb.SRem(ctx, lua.ActiveSKUs, member)
	r.rdb.SAdd(ctx, own, member)
	t.Cleanup(func() { r.rdb.Del(context.Background(), own) })
	scan, err := senddue.New(r.rdb, broker, senddue.Options{Topic: "t", Lease: time.Second, SendTimeout: time.Second,
		BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, ActiveSKUs: own}, m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// Far more attempts than the old budget of 20, each failing.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := scan.ScanOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := r.rdb.HGet(ctx, r.k.Reservation(rids[0].String()), "send_attempts").Int(); n >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scanner stopped re-sending: %v", r.rdb.HGetAll(ctx, r.k.Reservation(rids[0].String())).Val())
		}
		time.Sleep(2 * time.Millisecond) // pacing the loop of scans (the backoff is what is tested)
	}
	for _, rid := range rids {
		h := r.rdb.HGetAll(ctx, r.k.Reservation(rid.String())).Val()
		if h["status"] != "RESERVED" || h["mq_state"] == "GAVE_UP" || r.rdb.ZScore(ctx, r.k.SendDue(), rid.String()).Err() != nil {
			t.Fatalf("reservation %s after the outage's retries: %v, in send_due: %v", rid, h, r.rdb.ZScore(ctx, r.k.SendDue(), rid.String()).Err())
		}
	}
	if age := testutil.ToFloat64(m.SendOldestAge); age <= 0 {
		t.Fatalf("oldest unsent age = %v during the outage, want > 0", age)
	}
	if n := testutil.ToFloat64(m.SendPending); n != buyers {
		t.Fatalf("unsent pending = %v, want %d", n, buyers)
	}

	// Past the deadline, with the broker still down: reconciliation decides.
	time.Sleep(time.Until(time.UnixMilli(mustInt(t, r.rdb.HGet(ctx, r.k.Reservation(rids[buyers-1].String()), "business_deadline_ms").Val()))) + 10*time.Millisecond)
	rep, err := r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	repaired := 0
	for _, a := range rep.Anomalies {
		if a.Type == reconcile.UnsentPastDeadline && a.Action == reconcile.ActionRepaired {
			repaired++
		}
	}
	if repaired != buyers {
		t.Fatalf("reconcile repaired %d unsent reservations, want %d: %+v", repaired, buyers, rep.Anomalies)
	}
	for _, rid := range rids {
		var status, reason string
		if err := r.pool.QueryRow(ctx, `SELECT status, reason_code FROM inventory_reservation WHERE reservation_id = $1`, rid).Scan(&status, &reason); err != nil {
			t.Fatal(err)
		}
		if status != "COMPENSATED" || reason != steps.ReasonDeadline {
			t.Fatalf("reservation %s in PostgreSQL: %s %s, want COMPENSATED %s", rid, status, reason, steps.ReasonDeadline)
		}
		if st := r.rdb.HGet(ctx, r.k.Reservation(rid.String()), "status").Val(); st != "COMPENSATED" {
			t.Fatalf("reservation %s in Redis: %s", rid, st)
		}
		if r.rdb.ZScore(ctx, r.k.SendDue(), rid.String()).Err() == nil {
			t.Fatalf("reservation %s still in send_due after compensation", rid)
		}
	}
	if c := r.counters(t); c["available"] != "10" || c["open_reserved"] != "0" || c["compensated_total"] != "3" {
		t.Fatalf("redis counters after compensation: %v", c)
	}
	// A second run repairs nothing again.
	rep2, err := r.rec.Run(ctx, r.k.ActivityID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rep2.Anomalies {
		if a.Action == reconcile.ActionRepaired {
			t.Fatalf("second run repaired %s %s", a.Type, a.Object)
		}
	}
	// The broker comes back and the old message arrives: no order.
	h := r.rdb.HGetAll(ctx, r.k.Reservation(rids[0].String())).Val()
	f, err := reservation.ParseFields(h)
	if err != nil {
		t.Fatal(err)
	}
	late, err := r.acts.CreateOrder(ctx, f.Message())
	if err != nil || late.Outcome != steps.OutcomeLate {
		t.Fatalf("late message = %+v, %v; want LATE", late, err)
	}
	var orders int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE activity_id = $1`, r.k.ActivityID).Scan(&orders)
	if orders != 0 {
		t.Fatalf("%d orders from late messages", orders)
	}
	// The users were rejected for being late, not for anything they did: they may try again.
	again, err := res.Reserve(ctx, 1, r.k.ActivityID, r.k.SKUID, uuid.New())
	if err != nil || again.Code != reservation.Queued || again.Duplicate {
		t.Fatalf("the user's new request after the rejection = %+v, %v; want a new reservation", again, err)
	}
}

func (r *rig) counters(t *testing.T) map[string]string {
	t.Helper()
	c, err := r.rdb.HGetAll(context.Background(), r.k.Counter()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
