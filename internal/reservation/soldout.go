package reservation

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Sold-out requests are answered from the gateway's memory. Once reserve.lua
// said SOLD_OUT for a SKU, the gateway remembers it for SoldOutMemo and holds
// a copy of the SKU's holders hash (lua.Keys.Holders: every user guard, with
// the reservation and request it admitted), loaded once in the background.
// While the memo runs and the copy is of the version the script last
// answered, a request gets the script's answer without Redis:
//
//   - the user holds a reservation admitted for this request: QUEUED again;
//   - the user holds another one: ALREADY_RESERVED;
//   - anyone else: SOLD_OUT.
//
// The copy cannot miss a holder of that version: a SKU sells out in one
// script run, after every admission that took its stock, and every change of
// the hash (an admission, a guard freed by compensation, a rebuild) bumps
// the version. What can be stale is what any memo risks: within SoldOutMemo,
// a unit given back (compensation, release) and taken again by another
// gateway is not seen yet; the next script run after the memo ends sees it,
// and its version makes the gateway load the hash again. Until a copy of the
// right version is loaded, a sold-out request costs one MGET (the request map
// and the user guard), as before.

// MaxHoldersCopy bounds the holders hash a gateway copies (SKUs with more
// holders keep the MGET answer).
const MaxHoldersCopy = 200_000

type soldOutSKU struct {
	until   time.Time // known sold out until then
	version int64     // the holders_version the script answered with SOLD_OUT
	holders *holderCopy
}

type holderCopy struct {
	version int64
	byUser  map[int64]holderEntry
}

type holderEntry struct{ reservation, request uuid.UUID }

// soldOut keeps one *atomic.Pointer[soldOutSKU] per lua.Keys.
type soldOut struct {
	skus    sync.Map // lua.Keys → *atomic.Pointer[soldOutSKU]
	loading sync.Map // lua.Keys → struct{}: a copy is being loaded
}

func (s *soldOut) get(k lua.Keys) *soldOutSKU {
	if p, ok := s.skus.Load(k); ok {
		return p.(*atomic.Pointer[soldOutSKU]).Load()
	}
	return nil
}

// mark records a SOLD_OUT answer of version v until until and reports
// whether the gateway's copy of the holders is missing or of another version.
func (s *soldOut) mark(k lua.Keys, until time.Time, v int64) (reload bool) {
	p, _ := s.skus.LoadOrStore(k, new(atomic.Pointer[soldOutSKU]))
	ptr := p.(*atomic.Pointer[soldOutSKU])
	var h *holderCopy
	if old := ptr.Load(); old != nil {
		h = old.holders
	}
	ptr.Store(&soldOutSKU{until: until, version: v, holders: h})
	return h == nil || h.version != v
}

func (s *soldOut) setHolders(k lua.Keys, h *holderCopy) {
	p, _ := s.skus.LoadOrStore(k, new(atomic.Pointer[soldOutSKU]))
	ptr := p.(*atomic.Pointer[soldOutSKU])
	for {
		old := ptr.Load()
		next := &soldOutSKU{holders: h}
		if old != nil {
			next.until, next.version = old.until, old.version
		}
		if ptr.CompareAndSwap(old, next) {
			return
		}
	}
}

// answer is the script's answer for (user, request) from the copy; ok is
// false when the gateway must ask Redis.
func (st *soldOutSKU) answer(now time.Time, userID int64, requestID uuid.UUID) (Result, bool) {
	if st == nil || !now.Before(st.until) || st.holders == nil || st.holders.version != st.version {
		return Result{}, false
	}
	e, ok := st.holders.byUser[userID]
	switch {
	case !ok:
		return Result{Code: SoldOut}, true
	case e.request == requestID:
		return Result{Code: Queued, ReservationID: e.reservation, Duplicate: true, Status: "UNKNOWN"}, true
	}
	return Result{Code: AlreadyReserved, ReservationID: e.reservation}, true
}

// loadHolders copies k's holders hash in the background, once at a time per SKU.
func (r *Reserver) loadHolders(k lua.Keys) {
	if _, busy := r.soldOut.loading.LoadOrStore(k, struct{}{}); busy {
		return
	}
	go func() {
		defer r.soldOut.loading.Delete(k)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h, err := readHolders(ctx, r.rdb, k)
		if err != nil {
			r.log.Warn("reservation.holders_copy_failed", "activity_id", k.ActivityID, "sku_id", k.SKUID, "error", err)
			return
		}
		if h != nil {
			r.soldOut.setHolders(k, h)
		}
	}()
}

// readHolders reads the holders hash and its version in one transaction; nil
// when it is larger than MaxHoldersCopy.
func readHolders(ctx context.Context, rdb redis.Cmdable, k lua.Keys) (*holderCopy, error) {
	n, err := rdb.HLen(ctx, k.Holders()).Result()
	if err != nil || n > MaxHoldersCopy {
		return nil, err
	}
	var ver *redis.StringCmd
	var all *redis.MapStringStringCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ver = p.HGet(ctx, k.Counter(), "holders_version")
		all = p.HGetAll(ctx, k.Holders())
		return nil
	}); err != nil && err != redis.Nil {
		return nil, err
	}
	v, _ := strconv.ParseInt(ver.Val(), 10, 64) // absent: 0, as reserve.lua reads it
	h := &holderCopy{version: v, byUser: make(map[int64]holderEntry, len(all.Val()))}
	for user, val := range all.Val() {
		u, err := strconv.ParseInt(user, 10, 64)
		rs, qs, ok := strings.Cut(val, " ")
		if err != nil || !ok {
			return nil, fmt.Errorf("holders entry %q: %q is not \"<reservation_id> <request_id>\"", user, val)
		}
		rid, err1 := uuid.Parse(rs)
		req, err2 := uuid.Parse(qs)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("holders entry %q: %q is not \"<reservation_id> <request_id>\"", user, val)
		}
		h.byUser[u] = holderEntry{reservation: rid, request: req}
	}
	return h, nil
}
