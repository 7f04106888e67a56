package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- init_sku.lua

// MetaMaxPerUser is the field of every bucket's meta hash holding the sale's
// per-user cap (hold_claim.lua's cap; missing: 1).
const MetaMaxPerUser = "max_per_user"

// MaxPerUser bounds a sale's cap: sale.MaxSKUs (a user holds at most one
// reservation per SKU, so a larger cap never binds).
const MaxPerUser = 1000

// InitSKUArgs sets up one SKU's admission state (init_sku.lua): the sale
// window always, the counters only when absent.
type InitSKUArgs struct {
	Initial, Available int64 // from PostgreSQL
	StartMS, EndMS     int64
	OrderDeadline      time.Duration
	PaymentTimeout     time.Duration
	// Unmoved: PostgreSQL shows no stock movement yet (initial = available),
	// so absent counters may be created.
	Unmoved bool
	// Buckets is the SKU's bucket count (0 means 1), kept in the meta hash.
	Buckets int
	// MaxPerUser is the sale's per-user cap (0 means 1), kept in the meta
	// hash (MetaMaxPerUser).
	MaxPerUser int
}

// Render returns the KEYS and ARGV of the call.
func (a InitSKUArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Counter(), k.Meta()}, []any{a.Initial, a.Available, a.StartMS, a.EndMS,
		a.OrderDeadline.Milliseconds(), a.PaymentTimeout.Milliseconds(), flag(a.Unmoved), max(a.Buckets, 1),
		max(a.MaxPerUser, 1)}
}

// InitSKUCode is init_sku.lua's answer.
type InitSKUCode int64

// init_sku.lua's codes.
const (
	InitSKUCreated InitSKUCode = 1 // counters created
	InitSKUKept    InitSKUCode = 0 // counters kept (a live SKU)
	// InitSKUNeedsRebuild: counters missing while PostgreSQL shows movements;
	// nothing written to them, Redis must be rebuilt from PostgreSQL.
	InitSKUNeedsRebuild InitSKUCode = -1
)

var initSKUNames = map[InitSKUCode]string{InitSKUCreated: "CREATED", InitSKUKept: "KEPT",
	InitSKUNeedsRebuild: "NEEDS_REBUILD"}

func (c InitSKUCode) String() string { return name(initSKUNames, c) }

// InitSKUReply is init_sku.lua's {code, available}.
type InitSKUReply struct {
	Code      InitSKUCode
	Available int64 // the counters' available stock (0 for NeedsRebuild)
}

// InitSKU runs init_sku.lua.
func InitSKU(ctx context.Context, rdb redis.Scripter, k Keys, a InitSKUArgs) (InitSKUReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, initSKU, "init_sku.lua", keys, argv, parseInitSKU)
}

func parseInitSKU(v any) (InitSKUReply, error) {
	const script = "init_sku.lua"
	a, err := array(script, v, 2)
	if err != nil {
		return InitSKUReply{}, err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return InitSKUReply{}, err
	}
	if !known(initSKUNames)(code) {
		return InitSKUReply{}, badReply(script, v, "unknown code %d", code)
	}
	avail, err := int64At(script, v, a, 1)
	if err != nil {
		return InitSKUReply{}, err
	}
	return InitSKUReply{Code: InitSKUCode(code), Available: avail}, nil
}
