package reservation_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/workers/rebalancer"
)

// bucketRig is a rig whose SKU is split into len(stock) buckets.
func bucketRig(t *testing.T, stock ...int64) *rig {
	t.Helper()
	return bucketRigWith(t, nil, stock...)
}

// bucketRigWith is bucketRig with the Reserver's options tuned.
func bucketRigWith(t *testing.T, tune func(*reservation.Options), stock ...int64) *rig {
	t.Helper()
	var tunes []func(*reservation.Options)
	if tune != nil {
		tunes = append(tunes, tune)
	}
	r := newRig(t, 0, tunes...)
	r.k = testenv.BucketSale(t, r.rdb, stock...)
	return r
}

// Four buckets, a burst of buyers who each send two requests (one of them
// twice at once): one reservation per user, no bucket oversold, each
// reservation in its user's bucket, and every message sent; with the
// gateway's on-demand moves between buckets (the default) and without.
func TestBucketsOneReservationPerUserNoOversell(t *testing.T) {
	for _, refill := range []bool{false, true} {
		t.Run(fmt.Sprintf("refill=%v", refill), func(t *testing.T) { oneReservationPerUserNoOversell(t, refill) })
	}
}

func oneReservationPerUserNoOversell(t *testing.T, refill bool) {
	const perBucket, buckets, buyers = 10, 4, 400
	r := bucketRigWith(t, func(o *reservation.Options) {
		o.NoRefill = !refill
		if refill {
			o.SoldOutMemo = 0 // the second tries below ask Redis
		}
	}, perBucket, perBucket, perBucket, perBucket)
	ctx := context.Background()
	var mu sync.Mutex
	held := map[int64]uuid.UUID{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for u := range buyers {
		user := int64(5000 + u)
		first := uuid.New()
		for _, req := range []uuid.UUID{first, first, uuid.New()} {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, req)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Code != reservation.Queued {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prior, ok := held[user]; ok && prior != res.ReservationID {
					t.Errorf("user %d holds %s and %s", user, prior, res.ReservationID)
				}
				held[user] = res.ReservationID
			}()
		}
	}
	wg.Wait()
	if refill {
		// A unit in flight between buckets at the very end of the burst can
		// make a buyer's request SOLD_OUT while the unit lands elsewhere: a
		// buyer told SOLD_OUT tries again once, and the whole stock is sold.
		for u := range buyers {
			user := int64(5000 + u)
			if _, ok := held[user]; ok {
				continue
			}
			res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New())
			if err != nil {
				t.Fatal(err)
			}
			if res.Code == reservation.Queued {
				held[user] = res.ReservationID
			}
		}
	}
	if len(held) != perBucket*buckets {
		t.Fatalf("%d users hold a reservation, want %d", len(held), perBucket*buckets)
	}
	sku := lua.SKU{ActivityID: r.k.ActivityID, SKUID: r.k.SKUID, Buckets: buckets}
	for user, rid := range held {
		k := sku.For(user)
		h := r.rdb.HGetAll(ctx, k.Reservation(rid.String())).Val()
		if h["user_id"] != strconv.FormatInt(user, 10) || h["bucket"] != strconv.Itoa(k.Bucket) {
			t.Errorf("user %d: reservation %s not in its bucket %d: %v", user, rid, k.Bucket, h)
		}
	}
	for _, k := range sku.All() {
		v := r.rdb.HMGet(ctx, k.Counter(), "initial", "available", "open_reserved", "xfer_in", "xfer_out").Val()
		if !refill && fmt.Sprint(v[:3]) != fmt.Sprintf("[%d 0 %d]", perBucket, perBucket) {
			t.Errorf("bucket %d counters initial/available/open = %v", k.Bucket, v[:3])
		}
		// With moves between buckets, each bucket still adds up and ends empty:
		// initial + in - out = open (nothing committed here).
		n := make([]int64, len(v))
		for i, x := range v {
			n[i], _ = strconv.ParseInt(fmt.Sprint(x), 10, 64)
		}
		if n[1] != 0 || n[0]+n[3]-n[4] != n[2] {
			t.Errorf("bucket %d counters initial/available/open/in/out = %v", k.Bucket, v)
		}
	}
	waitFor(t, 30*time.Second, "every bucket's messages sent", func() bool {
		for _, k := range sku.All() {
			if n := r.rdb.ZCount(ctx, k.SendDue(), "-inf", strconv.FormatInt(time.Now().UnixMilli(), 10)).Val(); n > 0 {
				return false
			}
		}
		return true
	})
}

// Without the gateway's on-demand moves (NoRefill), a user whose bucket is
// empty is told SOLD_OUT while another bucket holds stock; the demand it
// leaves makes the rebalancer move stock there, and the user's next try,
// after the sold-out memo, is admitted.
func TestBucketsSoldOutWhileStockElsewhereIsBounded(t *testing.T) {
	r := bucketRigWith(t, func(o *reservation.Options) { o.NoRefill = true }, 0, 6)
	ctx := context.Background()
	sku := lua.SKU{ActivityID: r.k.ActivityID, SKUID: r.k.SKUID, Buckets: 2}
	user := int64(1)
	for sku.For(user).Bucket != 0 {
		user++
	}
	res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New())
	if err != nil || res.Code != reservation.SoldOut {
		t.Fatalf("empty bucket answered %+v, %v; want SOLD_OUT", res, err)
	}
	if hits := r.rdb.HGet(ctx, sku.Bucket(0).Counter(), "sold_out_hits").Val(); hits != "1" {
		t.Fatalf("sold_out_hits = %q after one sold-out answer, want 1", hits)
	}
	set := fmt.Sprintf("test:active:%x", testenv.RandomUint64())
	r.rdb.SAdd(ctx, set, sku.Bucket(0).Member(), sku.Bucket(1).Member())
	t.Cleanup(func() { r.rdb.Del(ctx, set) })
	rb, err := rebalancer.New(r.rdb, rebalancer.Options{TTL: time.Hour, ActiveSKUs: set,
		LeaseKey: set + ":lease"}, metrics.NewRebalance(prometheus.NewRegistry()), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, 10*time.Second, "the user admitted after stock moved to its bucket", func() bool {
		if _, err := rb.TickOnce(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := r.res.Reserve(ctx, user, r.k.ActivityID, r.k.SKUID, uuid.New())
		return err == nil && res.Code == reservation.Queued
	})
	t.Logf("admitted %v after the first SOLD_OUT (sold-out memo 200ms)", time.Since(start).Round(time.Millisecond))
	var total int64
	for _, k := range sku.All() {
		v := r.rdb.HMGet(ctx, k.Counter(), "initial", "available", "open_reserved", "committed", "xfer_in", "xfer_out").Val()
		n := make([]int64, len(v))
		for i, x := range v {
			n[i], _ = strconv.ParseInt(fmt.Sprint(x), 10, 64)
		}
		if n[0]+n[4]-n[5] != n[1]+n[2]+n[3] {
			t.Errorf("bucket %d does not add up: %v", k.Bucket, v)
		}
		total += n[1] + n[2]
	}
	if total != 6 {
		t.Errorf("available + open over the buckets = %d, want 6", total)
	}
}
