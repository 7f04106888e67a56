package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// The order transaction is the cap's backstop: with the user's Redis holds
// gone (two reservations admitted by reserve.lua alone, as after a loss of
// the holds hash), the order beyond max_per_user is durably rejected
// (USER_CAP_REACHED) and its unit goes back to Redis by the standard
// compensation; PostgreSQL's stock is untouched by it.
func TestOrderTransactionRefusesAnOrderBeyondTheCap(t *testing.T) {
	r := newRig(t, 10, 10)
	ctx := context.Background()
	other := lua.Keys{ActivityID: r.k.ActivityID, SKUID: 4}
	a := sale.Activity{ActivityID: r.k.ActivityID, Name: "t", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, SKUs: []sale.SKU{{SKUID: 4, Stock: 10, PriceCents: 1999}}}
	if _, err := sale.Setup(ctx, r.pool, r.rdb, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeleteSKUKeys(ctx, r.rdb, other) })
	const user = 5
	first := r.reserve(t, user)
	second := testenv.MustReserve(t, r.rdb, r.ids, other, user)

	res, err := r.acts.CreateOrder(ctx, first)
	if err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatalf("first order: %+v, %v", res, err)
	}
	res, err = r.acts.CreateOrder(ctx, second)
	if err != nil || res.Outcome != steps.OutcomeRejected || res.Reason != steps.ReasonUserCap {
		t.Fatalf("order beyond the cap: %+v, %v; want ORDER_REJECTED USER_CAP_REACHED", res, err)
	}
	if n := r.count(t, `SELECT count(*) FROM orders WHERE activity_id = $1 AND user_id = $2`, r.k.ActivityID, user); n != 1 {
		t.Fatalf("orders of the user: %d, want 1", n)
	}
	if n := r.count(t, `SELECT count(*) FROM compensation_task WHERE reservation_id = $1`, second.ReservationID); n != 1 {
		t.Fatalf("compensation tasks of the refused reservation: %d, want 1", n)
	}
	if n := r.count(t, `SELECT available_stock FROM sku_inventory WHERE activity_id = $1 AND sku_id = 4`, r.k.ActivityID); n != 10 {
		t.Fatalf("PostgreSQL stock of the refused SKU: %d, want 10", n)
	}
	if v := r.rdb.HGet(ctx, other.Counter(), "available").Val(); v != "9" {
		t.Fatalf("Redis available of the refused SKU before compensation: %s, want 9", v)
	}
	c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: second.ReservationID, ActivityID: other.ActivityID, SKUID: other.SKUID})
	if err != nil || c.Status != state.ReservationCompensated {
		t.Fatalf("compensate: %+v, %v", c, err)
	}
	if v := r.rdb.HGet(ctx, other.Counter(), "available").Val(); v != "10" {
		t.Fatalf("Redis available of the refused SKU after compensation: %s, want 10 (the unit given back)", v)
	}
	// The first reservation's order still holds the place; a cap of 2 set
	// up from the start would have let both through (sale_activity decides).
	var stored int
	if err := r.pool.QueryRow(ctx, `SELECT max_per_user FROM sale_activity WHERE activity_id = $1`, r.k.ActivityID).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("stored max_per_user %d, %v; want the default 1", stored, err)
	}
}

// A sale's cap is fixed once set up: another value is refused and nothing
// is written; leaving it out keeps it.
func TestSaleCapIsFixedOnceSetUp(t *testing.T) {
	r := newRig(t, 1, 1)
	ctx := context.Background()
	a := sale.Activity{ActivityID: r.k.ActivityID, Name: "renamed", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, MaxPerUser: 3, SKUs: []sale.SKU{{SKUID: 3, Stock: 1}}}
	_, err := sale.Setup(ctx, r.pool, r.rdb, a)
	if fe, ok := err.(*sale.MaxPerUserFixedError); !ok || fe.Stored != 1 {
		t.Fatalf("another cap: %v, want MaxPerUserFixedError (stored 1)", err)
	}
	if n := r.count(t, `SELECT count(*) FROM sale_activity WHERE activity_id = $1 AND name = 't' AND max_per_user = 1`, r.k.ActivityID); n != 1 {
		t.Fatalf("the refused set-up wrote the activity row")
	}
	a.MaxPerUser = 0
	if _, err := sale.Setup(ctx, r.pool, r.rdb, a); err != nil {
		t.Fatalf("set-up without max_per_user: %v", err)
	}
	if v := r.rdb.HGet(ctx, r.k.Meta(), lua.MetaMaxPerUser).Val(); v != "1" {
		t.Fatalf("meta max_per_user %q, want 1", v)
	}
}

// A sale's currency is fixed once set up (its orders are priced in it):
// another one is refused and nothing is written; leaving it out keeps it;
// an order reads its currency from the sale.
func TestSaleCurrencyIsFixedOnceSetUp(t *testing.T) {
	r := newRig(t, 1, 1)
	ctx := context.Background()
	var stored string
	if err := r.pool.QueryRow(ctx, `SELECT currency FROM sale_activity WHERE activity_id = $1`, r.k.ActivityID).Scan(&stored); err != nil || stored != "CNY" {
		t.Fatalf("stored currency %q, %v; want the default CNY", stored, err)
	}
	a := sale.Activity{ActivityID: r.k.ActivityID, Name: "renamed", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, Currency: new("EUR"), SKUs: []sale.SKU{{SKUID: 3, Stock: 1}}}
	_, err := sale.Setup(ctx, r.pool, r.rdb, a)
	if fe, ok := err.(*sale.CurrencyFixedError); !ok || fe.Stored != "CNY" {
		t.Fatalf("another currency: %v, want CurrencyFixedError (stored CNY)", err)
	}
	if n := r.count(t, `SELECT count(*) FROM sale_activity WHERE activity_id = $1 AND name = 't' AND currency = 'CNY'`, r.k.ActivityID); n != 1 {
		t.Fatalf("the refused set-up wrote the activity row")
	}
	for _, c := range []*string{nil, new("CNY")} { // absent keeps the stored one
		a.Currency = c
		if _, err := sale.Setup(ctx, r.pool, r.rdb, a); err != nil {
			t.Fatalf("set-up with currency %v: %v", c, err)
		}
	}
}
