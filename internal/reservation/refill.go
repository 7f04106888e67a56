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

// maxRefills bounds the on-demand moves of one request.
const maxRefills = 3

// maxRefillUnits bounds the units one on-demand move takes.
const maxRefillUnits = 64

// errNoStock: no sibling bucket holds a unit.
var errNoStock = errors.New("no sibling bucket holds stock")

// refill moves a share of the richest sibling bucket's stock into k's bucket
// (sku has sku.Buckets > 1). It returns errNoStock when every sibling is
// empty, nil when units were moved or a sibling still had some (a take that
// found it short: another buyer was faster), and any Redis error.
func (r *Reserver) refill(ctx context.Context, sku lua.SKU, k lua.Keys) error {
	from, avail, err := r.richestSibling(ctx, sku, k.Bucket)
	if err != nil {
		return err
	}
	if avail <= 0 {
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

// richestSibling reads every bucket's counters (lua.ReadBuckets, one
// pipeline) and returns the other bucket holding the most.
func (r *Reserver) richestSibling(ctx context.Context, sku lua.SKU, own int) (bucket int, available int64, err error) {
	bs, err := lua.ReadBuckets(ctx, r.rdb, sku.Bucket(0), sku.Buckets)
	if err != nil {
		return 0, 0, err
	}
	for _, b := range bs {
		if b.Bucket != own && b.Exists && b.Available > available {
			bucket, available = b.Bucket, b.Available
		}
	}
	return bucket, available, nil
}
