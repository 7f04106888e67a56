package invariants_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

func TestCheckActivityFindsABrokenSKU(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	a := sale.Activity{ActivityID: testenv.ActivityID(), Name: "check", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, SKUs: []sale.SKU{{SKUID: 1, Stock: 5, PriceCents: 100}, {SKUID: 2, Stock: 7, PriceCents: 100}}}
	if _, err := sale.Setup(ctx, pool, rdb, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, sku := range []int64{1, 2} {
			rdb.SRem(ctx, lua.ActiveSKUs, fmt.Sprintf("%d:%d", a.ActivityID, sku))
			k := lua.Keys{ActivityID: a.ActivityID, SKUID: sku}
			rdb.Del(ctx, k.Counter(), k.Meta())
		}
	})
	res, err := invariants.CheckActivity(ctx, pool, rdb, a.ActivityID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || len(res[0].Violations)+len(res[1].Violations) != 0 {
		t.Fatalf("fresh sale: %+v, want two SKUs without violations", res)
	}
	// A unit disappears from Redis's stock of SKU 2 (PostgreSQL's CHECK
	// constraint keeps its own sum): conservation is off.
	if err := rdb.HIncrBy(ctx, lua.Keys{ActivityID: a.ActivityID, SKUID: 2}.Counter(), "available", -1).Err(); err != nil {
		t.Fatal(err)
	}
	res, err = invariants.CheckActivity(ctx, pool, rdb, a.ActivityID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Violations) != 0 || len(res[1].Violations) == 0 || res[1].Violations[0].Invariant != "I7" {
		t.Fatalf("after losing a unit of SKU 2: %+v", res)
	}
	if _, err := invariants.CheckActivity(ctx, pool, rdb, a.ActivityID+1, false); !errors.Is(err, invariants.ErrUnknownActivity) {
		t.Fatalf("unknown activity: %v, want ErrUnknownActivity", err)
	}
}
