package reservation

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/seckill/seckill/lua"
)

// A SKU of several buckets (docs/scale.md) admits each user in one bucket,
// so a bucket can be sold out while another still has units. The rebalancer
// evens the buckets out in the background; a buyer who reaches an empty
// bucket before it does is not told SOLD_OUT for that: the gateway moves
// stock on demand. On reserve.lua's SOLD_OUT it reads the sibling buckets'
// available, takes a share from the one holding the most by the
// rebalancer's own protocol (xfer_take → xfer_give → xfer_close under one
// transfer id: a gateway that dies half-way leaves a SENT record that the
// rebalancer's recovery finishes) and runs the script again, at most
// maxRefills times. SOLD_OUT is the answer only when no sibling holds a
// unit; one given while a sibling did (every refill lost its units to other
// buyers) is counted in seckill_reserve_false_sold_out_total, and answered
// as SOLD_OUT without a memo, so the next request tries again.

// maxRefills bounds the on-demand moves (and looks at units in flight) of
// one request.
const maxRefills = 4

// maxRefillUnits bounds the units one on-demand move takes.
const maxRefillUnits = 64

// errNoStock: no sibling bucket holds a unit and none is in flight between
// buckets (or the requester's own bucket has no counter: nothing may be
// given to it before a rebuild).
var errNoStock = errors.New("no sibling bucket holds stock")

// errInFlight: no sibling bucket holds a unit now, but units are between the
// take and the give of a move (another request's): they land in a moment.
var errInFlight = errors.New("no sibling bucket holds stock now; units in flight")

// refill moves a share of the richest sibling bucket's stock into k's bucket
// (sku has sku.Buckets > 1). It returns errNoStock when no bucket has a unit
// to give here, errInFlight when units are between buckets, nil when units
// were moved or a sibling still had some (a take that found it short:
// another buyer was faster), and any Redis error.
func (r *Reserver) refill(ctx context.Context, sku lua.SKU, k lua.Keys) error {
	bs, err := lua.ReadBuckets(ctx, r.rdb, sku.Bucket(0), sku.Buckets)
	if err != nil {
		r.m.Refills.WithLabelValues("failed").Inc()
		return err
	}
	from, avail, inFlight := richestSibling(bs, k.Bucket)
	switch {
	case !bs[k.Bucket].Exists:
		// No counter here (lost, or left for a rebuild): the rebalancer never
		// gives to such a bucket, nor does a refill.
		r.m.Refills.WithLabelValues("no_counter").Inc()
		return errNoStock
	case avail <= 0 && inFlight > 0:
		r.m.Refills.WithLabelValues("in_flight").Inc()
		return errInFlight
	case avail <= 0:
		r.m.Refills.WithLabelValues("no_stock").Inc()
		return errNoStock
	}
	n := min(max(1, avail/int64(sku.Buckets)), maxRefillUnits)
	id := uuid.NewString()
	src := k.InBucket(from)
	take, err := lua.XferTake(ctx, r.rdb, src, lua.XferTakeArgs{TransferID: id, To: k.Bucket, K: n, NowMS: r.now().UnixMilli()})
	if err != nil {
		r.m.Refills.WithLabelValues("failed").Inc()
		return fmt.Errorf("refill take %s: %w", id, err)
	}
	if take.Code == lua.XferShort {
		r.m.Refills.WithLabelValues("short").Inc()
		return nil
	}
	if take.Code == lua.XferTakeConflict {
		r.m.Refills.WithLabelValues("failed").Inc()
		return fmt.Errorf("refill take %s: %s", id, take.Code)
	}
	give, err := lua.XferGive(ctx, r.rdb, k, lua.XferGiveArgs{TransferID: id, From: from, K: n, TTL: r.opt.ReservationTTL})
	if err != nil || !give.Code.Applied() {
		// The record stays SENT: the rebalancer's recovery gives it again.
		r.m.Refills.WithLabelValues("failed").Inc()
		return fmt.Errorf("refill give %s to bucket %d: %v %w", id, k.Bucket, give.Code, err)
	}
	if _, err := lua.XferClose(ctx, r.rdb, src, lua.XferCloseArgs{TransferID: id, TTL: r.opt.ReservationTTL}); err != nil {
		// The units arrived; recovery closes the record.
		r.log.WarnContext(ctx, "reserve.refill_close_failed", "transfer_id", id, "error", err)
	}
	r.m.Refills.WithLabelValues("moved").Inc()
	r.m.RefillUnits.Add(float64(n))
	return nil
}

// richestSibling returns, from every bucket's counters, the other bucket
// holding the most, its available, and the units in flight between buckets
// (Σ xfer_out − Σ xfer_in: taken and not given yet).
func richestSibling(bs []lua.BucketStock, own int) (bucket int, available, inFlight int64) {
	for _, b := range bs {
		inFlight += b.XferOut - b.XferIn
		if b.Bucket != own && b.Exists && b.Available > available {
			bucket, available = b.Bucket, b.Available
		}
	}
	return bucket, available, inFlight
}
