// Package lua holds the Redis Lua scripts of the hot path, one per file, and
// the key layout they rely on. Every key of one (activity, sku) carries the
// hash tag {activity:sku}, so each script touches a single Redis Cluster slot;
// a user's holds across a sale's SKUs have a slot of their own (Holds).
package lua

import (
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reserve.lua
	reserveSrc string
	//go:embed send_claim.lua
	sendClaimSrc string
	//go:embed send_done.lua
	sendDoneSrc string
	//go:embed init_sku.lua
	initSKUSrc string
	//go:embed order_created.lua
	orderCreatedSrc string
	//go:embed compensate.lua
	compensateSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed xfer_take.lua
	xferTakeSrc string
	//go:embed xfer_give.lua
	xferGiveSrc string
	//go:embed xfer_close.lua
	xferCloseSrc string
	//go:embed hold_claim.lua
	holdClaimSrc string
	//go:embed hold_release.lua
	holdReleaseSrc string
)

// Scripts run with EVALSHA (go-redis falls back to EVAL once if the script
// cache was flushed). See each file's header for KEYS, ARGV and return codes;
// calls.go is the typed layer every caller goes through.
var (
	reserve   = redis.NewScript(reserveSrc)
	sendClaim = redis.NewScript(sendClaimSrc)
	sendDone  = redis.NewScript(sendDoneSrc)
	initSKU   = redis.NewScript(initSKUSrc)
	// orderCreated projects a created order onto Redis (open_reserved → committed once).
	orderCreated = redis.NewScript(orderCreatedSrc)
	// compensate gives a rejected reservation's unit back, at most once.
	compensate = redis.NewScript(compensateSrc)
	// release gives a cancelled order's unit back (committed → available once).
	release = redis.NewScript(releaseSrc)
	// xferTake, xferGive and xferClose are the three steps of a stock
	// transfer between two buckets of a SKU (calls_xfer.go).
	xferTake  = redis.NewScript(xferTakeSrc)
	xferGive  = redis.NewScript(xferGiveSrc)
	xferClose = redis.NewScript(xferCloseSrc)
	// holdClaim and holdRelease keep a user's holds across a sale's SKUs
	// (calls_hold.go), in the user's own slot.
	holdClaim   = redis.NewScript(holdClaimSrc)
	holdRelease = redis.NewScript(holdReleaseSrc)
)

// All lists every script, for loading them at start-up (SCRIPT LOAD).
func All() map[string]*redis.Script {
	return map[string]*redis.Script{
		"reserve.lua":       reserve,
		"send_claim.lua":    sendClaim,
		"send_done.lua":     sendDone,
		"init_sku.lua":      initSKU,
		"order_created.lua": orderCreated,
		"compensate.lua":    compensate,
		"release.lua":       release,
		"xfer_take.lua":     xferTake,
		"xfer_give.lua":     xferGive,
		"xfer_close.lua":    xferClose,
		"hold_claim.lua":    holdClaim,
		"hold_release.lua":  holdRelease,
	}
}

// ReserveSHA is reserve.lua's SHA1, the name EVALSHA runs it by (for clients
// outside Go, such as redis-benchmark).
func ReserveSHA() string { return reserve.Hash() }

// Keys builds the Redis keys of one (activity, sku) stock bucket. A SKU's
// Redis stock may be split into B buckets (docs/scale.md), each in its own
// hash slot: bucket 0 has the tag {activity:sku} (a SKU of one bucket keeps
// the layout it had before buckets), bucket b > 0 the tag {activity:sku:b}.
// A user always uses the bucket BucketOf gives.
type Keys struct {
	ActivityID int64
	SKUID      int64
	Bucket     int
}

// InBucket is k for bucket b of the same SKU.
func (k Keys) InBucket(b int) Keys { k.Bucket = b; return k }

// Member is k's member of ActiveSKUs: "activity:sku", or
// "activity:sku:bucket" for a bucket above 0 (also the text of its hash tag).
func (k Keys) Member() string {
	if k.Bucket == 0 {
		return strconv.FormatInt(k.ActivityID, 10) + ":" + strconv.FormatInt(k.SKUID, 10)
	}
	return fmt.Sprintf("%d:%d:%d", k.ActivityID, k.SKUID, k.Bucket)
}

func (k Keys) prefix() string { return "seckill:{" + k.Member() + "}:" }

// MaxBuckets bounds a SKU's bucket count.
const MaxBuckets = 64

// BucketOf is the bucket of userID among buckets (1 … MaxBuckets): a fixed
// hash (splitmix64's finaliser) of the user id, so a user never changes
// bucket for a given B, and user ids given out in strides still spread.
func BucketOf(userID int64, buckets int) int {
	if buckets <= 1 {
		return 0
	}
	z := uint64(userID) + 0x9e3779b97f4a7c15 // #nosec G115 -- the id's bits are hashed, not used as a quantity
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(buckets)) // #nosec G115 -- below buckets (> 1 here), which is an int
}

// Counter is the hash of stock counters: initial, available, open_reserved,
// committed (initial = available + open_reserved + committed), plus totals.
func (k Keys) Counter() string { return k.prefix() + "counter" }

// Meta is the hash of sale settings the scripts read: start_ms, end_ms, order_deadline_ms.
func (k Keys) Meta() string { return k.prefix() + "meta" }

// Reservation is the hash of one reservation with every recovery field.
func (k Keys) Reservation(reservationID string) string { return k.prefix() + "r:" + reservationID }

// Request maps (user, request_id) to the reservation it produced.
func (k Keys) Request(userID int64, requestID string) string {
	return k.request(strconv.FormatInt(userID, 10), requestID)
}

// User is the one-reservation-per-user guard.
func (k Keys) User(userID int64) string { return k.user(strconv.FormatInt(userID, 10)) }

// request and user take the user id as text, so that ReserveArgs.Template
// can put a placeholder in its place.
func (k Keys) request(user, requestID string) string {
	return k.prefix() + "req:" + user + ":" + requestID
}
func (k Keys) user(user string) string { return k.prefix() + "user:" + user }

// Holders is the hash of every user guard of the SKU: user id →
// "<reservation_id> <request_id>" (reserve.lua writes it, compensate.lua
// and rebuild keep it), read by gateways that answer sold-out requests from
// memory.
func (k Keys) Holders() string { return k.prefix() + "holders" }

// SendDue is the sorted set of reservations whose message is not confirmed
// sent; the score is the next time a scanner may send it (ms).
func (k Keys) SendDue() string { return k.prefix() + "send_due" }

// CompensationMarker records that a reservation's stock was given back.
func (k Keys) CompensationMarker(reservationID string) string {
	return k.prefix() + "comp:" + reservationID
}

// ReleaseMarker records that a cancelled order's unit was given back.
func (k Keys) ReleaseMarker(reservationID string) string { return k.prefix() + "rel:" + reservationID }

// Transfer is the record, in the giving bucket, of a stock transfer to
// another bucket of the SKU (docs/scale.md): to, k, state SENT|DONE, created_ms.
func (k Keys) Transfer(id string) string { return k.prefix() + "xfer:" + id }

// TransfersOut is the sorted set of the giving bucket's SENT transfers
// (score = created_ms), which the rebalancer finishes after a crash.
func (k Keys) TransfersOut() string { return k.prefix() + "xfer_out" }

// TransfersClosed is the sorted set of the giving bucket's closed (DONE)
// transfers (score = created_ms), kept as long as a marker lives, so that
// reconciliation can find a give that the receiving bucket lost after the
// close (docs/scale.md, "A lost give").
func (k Keys) TransfersClosed() string { return k.prefix() + "xfer_closed" }

// TransferIn is the receiving bucket's marker that transfer id was applied.
func (k Keys) TransferIn(id string) string { return k.prefix() + "xin:" + id }

// ActiveSKUs is the set of bucket members (Keys.Member: "activity:sku" and,
// for buckets above 0, "activity:sku:bucket") the send-due scanner walks.
// It lives outside any SKU slot and is only read on its own.
const ActiveSKUs = "seckill:active_skus"
