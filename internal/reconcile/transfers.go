package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill/seckill/lua"
)

// Anomalies of the stock transfers between a SKU's buckets (docs/scale.md,
// "A lost give").
const (
	// TransferGiveLost: a closed transfer whose receiving bucket lost the
	// give (its master lost its last writes after the giver's close). AUTO:
	// the give again with the transfer's id (xfer_give.lua, as the
	// rebalancer gives): the marker applies it once.
	TransferGiveLost = "TRANSFER_GIVE_LOST"
	// TransferUnaccounted: units in flight by the counters that no record
	// proves lost, or a closed transfer without a marker that the counters
	// do not show missing. MANUAL.
	TransferUnaccounted = "TRANSFER_UNACCOUNTED"
)

// SummaryTransferStale is the report summary's count of units in flight
// longer than the watermark that the run left so (after its repairs),
// exported as seckill_inventory_transfer_stale_units.
const SummaryTransferStale = "transfer_stale_units"

// stableReads bounds the reads of a SKU's transfers in one run while looking
// for two in a row during which no transfer ran.
const stableReads = 4

// transfers compares sku's transfer counters with its transfer records and
// gives again what it can prove was lost.
//
// What is provable. Close runs only after its give answered GIVEN or
// ALREADY, so a DONE record proves the give was applied once. If the
// target's marker is missing now, either the target lost the give (marker
// and counters together: one script) or the marker expired or was deleted
// with the units in place. Expiry is ruled out for a transfer taken less
// than half the marker TTL ago (a give follows its take and its marker lives
// the reservation TTL). Deletion is ruled out by the counters: with no
// transfer running during the reads, Σ xfer_out − Σ xfer_in − the SENT
// records' units is exactly the units lost on the way, and it must cover
// every such transfer. Anything else is reported, never given.
func (r *Reconciler) transfers(ctx context.Context, sku lua.SKU, rep *Report) error {
	if sku.Buckets <= 1 {
		return nil
	}
	s, excess, stable, err := r.readTransfers(ctx, sku.Bucket(0))
	if err != nil {
		return err
	}
	var lostUnits, repaired int64
	for _, t := range s.Unmarked {
		lostUnits += t.K
	}
	skuObj := fmt.Sprintf("sku:%d:%d", sku.ActivityID, sku.SKUID)
	ttl := r.stores.Inventory.TerminalTTL()
	for _, t := range s.Unmarked {
		ev := map[string]any{"sku": skuObj, "transfer": t, "units_missing_by_counters": excess,
			"units_of_closed_transfers_without_marker": lostUnits, "reads_agree": stable, "buckets": s.Buckets}
		switch why := unprovable(sku, t, r.now(), ttl, excess, lostUnits, stable); why {
		case "":
			r.auto(ctx, rep, TransferGiveLost, "transfer:"+t.ID, t.K, "GIVEN", ev, func() (string, error) {
				res, err := lua.XferGive(ctx, r.rdb, sku.Bucket(t.To), lua.XferGiveArgs{TransferID: t.ID, From: t.From, K: t.K, TTL: ttl})
				switch {
				case err != nil:
					return "", err
				case res.Code == lua.XferGiven:
					repaired += t.K
					return fmt.Sprintf("gave the %d units from bucket %d to bucket %d again (available %d)", t.K, t.From, t.To, res.Available), nil
				case res.Code == lua.XferAlreadyGiven:
					return "the marker is back: nothing given", nil
				}
				return "", fmt.Errorf("give to bucket %d: %s (rebuild Redis from PostgreSQL)", t.To, res.Code)
			})
		case "unsettled":
			r.log.Warn("reconcile.transfer_unsettled", "sku", skuObj, "transfer_id", t.ID, "k", t.K)
		default:
			r.manual(ctx, rep, TransferUnaccounted, "transfer:"+t.ID, t.K, why, ev)
		}
	}
	if stable && (excess < 0 || excess > lostUnits) {
		r.manual(ctx, rep, TransferUnaccounted, skuObj, excess-lostUnits, fmt.Sprintf(
			"Σ xfer_out − Σ xfer_in − SENT records = %d units over %d buckets, %d of them in closed transfers without a marker: "+
				"no record explains the rest (negative: more given than taken)", excess, sku.Buckets, lostUnits),
			map[string]any{"sku": skuObj, "stock": s})
	}
	stale := max(excess-repaired, 0)
	cutoff := r.now().Add(-r.watermark).UnixMilli()
	for _, t := range s.Pending {
		if t.CreatedMS < cutoff {
			stale += t.K // SENT and not given past the watermark: the rebalancer's recovery is not finishing it
		}
	}
	if stale > 0 {
		rep.Summary[SummaryTransferStale] += int(stale)
	}
	return nil
}

// unprovable says why the closed transfer t without a marker may not be
// given again ("" when it may; "unsettled" when transfers ran during the
// reads, so the next run decides).
func unprovable(sku lua.SKU, t lua.Transfer, now time.Time, ttl time.Duration, excess, lostUnits int64, stable bool) string {
	switch age := now.Sub(time.UnixMilli(t.CreatedMS)); {
	case t.To == t.From || t.To >= sku.Buckets:
		return fmt.Sprintf("the record of bucket %d names bucket %d of %d", t.From, t.To, sku.Buckets)
	case age >= ttl/2:
		return fmt.Sprintf("taken %s ago, past half the markers' TTL %s: the marker may have expired with the units given", age.Round(time.Second), ttl)
	case !stable:
		return "unsettled"
	case excess < lostUnits:
		return fmt.Sprintf("the counters show %d units missing, the closed transfers without a marker %d: "+
			"a marker was deleted or expired with its units given; not given again", excess, lostUnits)
	}
	return ""
}

// readTransfers reads sku's stock until two reads in a row agree that no
// transfer ran meanwhile (stable), at most stableReads times. excess is the
// smaller of the last two reads' InFlight − InFlightRecords: an upper bound
// of the units lost on the way in any read (lua.ReadSKUStock), exact when stable.
func (r *Reconciler) readTransfers(ctx context.Context, k lua.Keys) (s lua.SKUStock, excess int64, stable bool, err error) {
	prev, err := lua.ReadSKUStock(ctx, r.rdb, k)
	if err != nil {
		return s, 0, false, err
	}
	for range stableReads - 1 {
		if s, err = lua.ReadSKUStock(ctx, r.rdb, k); err != nil {
			return s, 0, false, err
		}
		excess = min(prev.InFlight-prev.InFlightRecords, s.InFlight-s.InFlightRecords)
		if stable = quiet(prev, s); stable {
			return s, excess, true, nil
		}
		prev = s
	}
	return s, excess, false, nil
}

// quiet reports that no transfer ran from a's first step to b's last: every
// bucket's xfer_in and xfer_out are the same in both, both reads' in-flight
// too, and so are the records read.
func quiet(a, b lua.SKUStock) bool {
	if len(a.Buckets) != len(b.Buckets) || a.InFlight != b.InFlight || a.InFlight != a.CounterInFlight() ||
		a.InFlightRecords != b.InFlightRecords || len(a.Unmarked) != len(b.Unmarked) || a.Sent != b.Sent {
		return false
	}
	for i, x := range a.Buckets {
		if y := b.Buckets[i]; x.XferIn != y.XferIn || x.XferOut != y.XferOut {
			return false
		}
	}
	return true
}
