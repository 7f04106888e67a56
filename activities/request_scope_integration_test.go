package activities_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

// reserveKey admits user on k with the client's Idempotency-Key req, as the
// gateway does, and returns the message it sends.
func reserveKey(t *testing.T, r *rig, k lua.Keys, user int64, req uuid.UUID) events.OrderCreateRequested {
	t.Helper()
	id, err := r.ids.ForRequest(0, k.ActivityID, k.SKUID, user, req)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	res, err := lua.Reserve(context.Background(), r.rdb, k, lua.ReserveArgs{ReservationID: id.ReservationID.String(),
		MessageID: id.MessageID.String(), RequestID: req.String(), UserID: user, NowMS: now, KeyVersion: id.KeyVersion,
		SchemaVersion: ids.SchemaVersion, TTL: time.Hour, SendDueAtMS: now + 3000})
	if err != nil || res.Code != lua.ReserveAdmitted {
		t.Fatalf("reserve user %d on sku %d: %+v %v", user, k.SKUID, res, err)
	}
	return reservation.Fields{ReservationID: id.ReservationID, MessageID: id.MessageID, RequestID: req, ActivityID: k.ActivityID,
		SKUID: k.SKUID, UserID: user, SchemaVersion: ids.SchemaVersion, KeyVersion: id.KeyVersion, ReservedAtMS: now,
		DeadlineMS: res.DeadlineMS}.Message()
}

// TestOneIdempotencyKeyOnTwoSKUsMakesTwoOrders: an Idempotency-Key names a
// request for one SKU of one sale (Redis, the derived ids and OpenAPI agree).
// The same key sent by one user for two SKUs, or for two sales, is two
// requests: each gets its order. (PostgreSQL's old UNIQUE (user_id,
// request_id) made the second order transaction fail on 23505 forever: no
// order, no rejection, its unit never given back.)
func TestOneIdempotencyKeyOnTwoSKUsMakesTwoOrders(t *testing.T) {
	r := newRig(t, 5, 5)
	ctx := context.Background()
	// A second SKU of the same sale, and a second sale, in the same database.
	other := sale.Activity{ActivityID: testenv.ActivityID(), Name: "t2", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, SKUs: []sale.SKU{{SKUID: 3, Stock: 5, PriceCents: 1999}}}
	if _, err := sale.Setup(ctx, r.pool, r.rdb, other); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock)
		VALUES ($1, 4, 1999, 5, 5)`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}
	// One user orders two SKUs of this sale: a cap of 2 (docs/spec.md#user-cap).
	if _, err := r.pool.Exec(ctx, `UPDATE sale_activity SET max_per_user = 2 WHERE activity_id = $1`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}
	sku4 := lua.Keys{ActivityID: r.k.ActivityID, SKUID: 4}
	if _, err := lua.InitSKU(ctx, r.rdb, sku4, lua.InitSKUArgs{Initial: 5, Available: 5, StartMS: time.Now().Add(-time.Hour).UnixMilli(),
		EndMS: time.Now().Add(time.Hour).UnixMilli(), OrderDeadline: 5 * time.Minute, PaymentTimeout: 15 * time.Minute, Unmoved: true}); err != nil {
		t.Fatal(err)
	}
	otherSale := lua.Keys{ActivityID: other.ActivityID, SKUID: 3}
	t.Cleanup(func() {
		testenv.DeleteSKUKeys(ctx, r.rdb, sku4)
		testenv.DeleteSKUKeys(ctx, r.rdb, otherSale)
		r.rdb.SRem(ctx, lua.ActiveSKUs, fmt.Sprintf("%d:3", other.ActivityID))
	})

	key := uuid.New()
	for _, k := range []lua.Keys{r.k, sku4, otherSale} {
		m := reserveKey(t, r, k, 42, key)
		res, err := r.acts.CreateOrder(ctx, m)
		if err != nil || res.Outcome != steps.OutcomeCreated {
			t.Fatalf("order for sale %d sku %d with the key used elsewhere = %+v, %v", k.ActivityID, k.SKUID, res, err)
		}
	}
	if n := r.count(t, `SELECT count(*) FROM orders WHERE user_id = 42 AND request_id = $1`, key); n != 3 {
		t.Fatalf("%d orders for the key, want 3 (one per SKU and sale)", n)
	}
	if n := r.count(t, `SELECT count(*) FROM inventory_reservation WHERE user_id = 42 AND request_id = $1 AND status = 'ORDER_CREATED'`, key); n != 3 {
		t.Fatalf("%d reservations ORDER_CREATED for the key, want 3", n)
	}
}
