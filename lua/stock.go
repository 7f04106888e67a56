package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ParseMember is the inverse of Keys.Member: "activity:sku" (bucket 0) or
// "activity:sku:bucket".
func ParseMember(member string) (Keys, error) {
	parts := strings.Split(member, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Keys{}, fmt.Errorf("active sku member %q is not activity:sku[:bucket]", member)
	}
	a, err1 := strconv.ParseInt(parts[0], 10, 64)
	s, err2 := strconv.ParseInt(parts[1], 10, 64)
	b, err3 := 0, error(nil)
	if len(parts) == 3 {
		b, err3 = strconv.Atoi(parts[2])
		if err3 == nil && (b < 1 || b >= MaxBuckets) {
			err3 = errors.New("bucket out of range")
		}
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return Keys{}, fmt.Errorf("active sku member %q is not activity:sku[:bucket]: %w", member, err)
	}
	return Keys{ActivityID: a, SKUID: s, Bucket: b}, nil
}

// MetaBuckets is the field of bucket 0's meta hash holding the SKU's bucket
// count B (missing: 1).
const MetaBuckets = "buckets"

// BucketCount reads the bucket count B of k's SKU from bucket 0's meta
// (missing or unreadable field: 1), bounded to 1 … MaxBuckets.
func BucketCount(ctx context.Context, rdb redis.Cmdable, k Keys) (int, error) {
	v, err := rdb.HGet(ctx, k.InBucket(0).Meta(), MetaBuckets).Result()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 1, nil
	}
	return min(n, MaxBuckets), nil
}

// TransferRecord is a transfer's record in its giving bucket.
type TransferRecord struct {
	ID        string
	To        int
	K         int64
	State     string // TransferSent or TransferDone
	CreatedMS int64
}

// ReadTransfer reads transfer id's record in giving bucket k; ok is false if
// there is none.
func ReadTransfer(ctx context.Context, rdb redis.Cmdable, k Keys, id string) (rec TransferRecord, ok bool, err error) {
	h, err := rdb.HGetAll(ctx, k.Transfer(id)).Result()
	if err != nil || len(h) == 0 {
		return rec, false, err
	}
	rec, err = parseTransfer(k, id, h)
	return rec, true, err
}

func parseTransfer(k Keys, id string, h map[string]string) (TransferRecord, error) {
	rec := TransferRecord{ID: id, State: h["state"]}
	to, e1 := strconv.Atoi(h["to"])
	n, e2 := strconv.ParseInt(h["k"], 10, 64)
	c, e3 := strconv.ParseInt(h["created_ms"], 10, 64)
	if err := errors.Join(e1, e2, e3); err != nil || to < 0 || to >= MaxBuckets || n <= 0 {
		return rec, fmt.Errorf("transfer record %s: bad fields %v: %w", k.Transfer(id), h, err)
	}
	rec.To, rec.K, rec.CreatedMS = to, n, c
	return rec, nil
}

// BucketStock is one bucket's counters.
type BucketStock struct {
	Bucket                                  int
	Initial, Available, OpenReserved        int64
	Committed, XferIn, XferOut, SoldOutHits int64
	// Compensated and Released count units compensate.lua and release.lua
	// gave back (compensated_total, released_total).
	Compensated, Released int64
	// Exists is false when the bucket has no counter hash.
	Exists bool
}

// Balance is the bucket's invariant's gap: (initial + xfer_in − xfer_out)
// − (available + open_reserved + committed); 0 when it holds.
func (b BucketStock) Balance() int64 {
	return b.Initial + b.XferIn - b.XferOut - (b.Available + b.OpenReserved + b.Committed)
}

// SKUStock is a SKU's stock over its buckets, as ReadSKUStock reads it.
// Buckets are each bucket's counters, each read atomically, the buckets not
// together (each is its own slot, on Redis Cluster its own master): every
// bucket's own invariant holds in any read, and so does the per-SKU sum with
// the in-flight of those same counters. InFlight and InFlightRecords come from
// later reads, in an order that can only over-count units in flight
// (ReadSKUStock), so InFlight ≥ InFlightRecords ≥ 0 in any read, and both
// equal the counters' in-flight when no transfer runs (a quiescent SKU).
type SKUStock struct {
	Buckets []BucketStock
	// Sums over the buckets.
	Initial, Available, OpenReserved, Committed int64
	// InFlight is Σ xfer_out, read after everything else, − Σ xfer_in, read
	// with the counters: units taken from a bucket and not yet given to
	// their target, over-counted by the transfers that ran during the read.
	InFlight int64
	// InFlightRecords is Σ k of the SENT records (every bucket's xfer_out)
	// whose target has no marker yet; Sent counts every SENT record.
	InFlightRecords int64
	Sent            int
	// Pending are the SENT records whose target has no marker (Σ k is
	// InFlightRecords).
	Pending []Transfer
	// Unmarked are the closed (DONE) transfers of every bucket's
	// xfer_closed whose target has no marker: the give was applied (close
	// runs only after it), so either the receiving bucket lost it (its
	// master lost its last writes) or the marker expired or was deleted.
	// Reconciliation tells the two apart (internal/reconcile, transfers.go).
	Unmarked []Transfer
}

// Transfer is a transfer record with its giving bucket.
type Transfer struct {
	From int
	TransferRecord
}

// CounterInFlight is Σ xfer_out − Σ xfer_in of Buckets (one read per
// bucket): it makes the per-SKU sum hold in any read, but while transfers run
// it can be off either way (a bucket read before a take, another after the give).
func (s SKUStock) CounterInFlight() int64 {
	var n int64
	for _, b := range s.Buckets {
		n += b.XferOut - b.XferIn
	}
	return n
}

// Check reports the first broken conservation rule: a bucket's invariant,
// the SKU's (Σ initial = Σ(available + open_reserved + committed) +
// in-flight), a negative counter or in-flight, fewer units in flight than
// the SENT records without a marker hold, and, if quiescent is set, in-flight
// equal to the SENT records' (a give lost or a marker missing shows here).
func (s SKUStock) Check(quiescent bool) error {
	for _, b := range s.Buckets {
		if g := b.Balance(); g != 0 {
			return fmt.Errorf("bucket %d: initial+xfer_in-xfer_out differs from available+open_reserved+committed by %d (%+v)", b.Bucket, g, b)
		}
		if b.Available < 0 || b.OpenReserved < 0 || b.Committed < 0 || b.XferIn < 0 || b.XferOut < 0 {
			return fmt.Errorf("bucket %d: a negative counter (%+v)", b.Bucket, b)
		}
	}
	counted := s.CounterInFlight()
	if got := s.Available + s.OpenReserved + s.Committed + counted; got != s.Initial {
		return fmt.Errorf("sku: Σ initial %d != Σ(available+open_reserved+committed) + in-flight = %d", s.Initial, got)
	}
	if s.InFlight < 0 {
		return fmt.Errorf("sku: in-flight %d is negative (more given than taken)", s.InFlight)
	}
	if s.InFlight < s.InFlightRecords {
		return fmt.Errorf("sku: in-flight %d by the counters, less than the %d of the SENT records without a marker", s.InFlight, s.InFlightRecords)
	}
	if quiescent && (s.InFlight != s.InFlightRecords || s.InFlight != counted) {
		return fmt.Errorf("sku: in-flight %d by the counters (%d as read with them), %d by the SENT records without a marker",
			s.InFlight, counted, s.InFlightRecords)
	}
	return nil
}

var stockFields = []string{"initial", "available", "open_reserved", "committed", "xfer_in", "xfer_out", "sold_out_hits",
	"compensated_total", "released_total"}

// ReadBuckets reads the counters of buckets 0 … n−1 of k's SKU in one pipeline.
func ReadBuckets(ctx context.Context, rdb redis.Cmdable, k Keys, n int) ([]BucketStock, error) {
	cmds := make([]*redis.SliceCmd, n)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			cmds[b] = p.HMGet(ctx, k.InBucket(b).Counter(), stockFields...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read bucket counters of %s: %w", k.InBucket(0).Member(), err)
	}
	out := make([]BucketStock, n)
	for b, c := range cmds {
		v := make([]int64, len(stockFields))
		exists := false
		for i, f := range c.Val() {
			if f == nil {
				continue
			}
			exists = true
			s, _ := f.(string)
			if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				return nil, fmt.Errorf("bucket %d counter field %s = %q: %w", b, stockFields[i], s, err)
			}
		}
		out[b] = BucketStock{Bucket: b, Initial: v[0], Available: v[1], OpenReserved: v[2], Committed: v[3],
			XferIn: v[4], XferOut: v[5], SoldOutHits: v[6], Compensated: v[7], Released: v[8], Exists: exists}
	}
	return out, nil
}

// ReadSKUStock reads k's SKU over its BucketCount buckets in three steps,
// one after the other:
//
//  1. every bucket's counters (ReadBuckets);
//  2. every SENT record of every bucket's xfer_out and every DONE record of
//     its xfer_closed, then each one's marker in its target;
//  3. every bucket's xfer_out counter again.
//
// InFlight is Σ xfer_out of step 3 − Σ xfer_in of step 1. The order makes it
// sound while transfers run, on any number of masters: xfer_in and xfer_out
// only grow, and a give adds to xfer_in only after its take added its k to
// xfer_out (the rebalancer gives once the take answered, recovery gives from
// the SENT record the take wrote; the marker applies an id once). So every
// unit step 1 saw given, step 3 sees taken: a transfer adds k·([taken before
// step 3] − [given before step 1]) ≥ 0 to InFlight, and so InFlight only
// over-counts (by the transfers taken or not yet given while the read ran)
// and is negative only when more was given than taken. Likewise a SENT record
// without a marker counted in step 2 was taken before step 3 and, its marker
// missing after step 1, not given before it: it adds its k to InFlight, so
// InFlight ≥ InFlightRecords. A rebuild during the read (it sets the totals to
// 0) is the exception.
func ReadSKUStock(ctx context.Context, rdb redis.Cmdable, k Keys) (SKUStock, error) {
	n, err := BucketCount(ctx, rdb, k)
	if err != nil {
		return SKUStock{}, err
	}
	bs, err := ReadBuckets(ctx, rdb, k, n)
	if err != nil {
		return SKUStock{}, err
	}
	s := SKUStock{Buckets: bs}
	for _, b := range bs {
		s.Initial += b.Initial
		s.Available += b.Available
		s.OpenReserved += b.OpenReserved
		s.Committed += b.Committed
		s.InFlight -= b.XferIn
	}
	if err := s.readRecords(ctx, rdb, k, n); err != nil {
		return s, err
	}
	out, err := readXferOut(ctx, rdb, k, n)
	s.InFlight += out
	return s, err
}

// readXferOut is Σ xfer_out over buckets 0 … n−1 (one pipeline).
func readXferOut(ctx context.Context, rdb redis.Cmdable, k Keys, n int) (int64, error) {
	cmds := make([]*redis.StringCmd, n)
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			cmds[b] = p.HGet(ctx, k.InBucket(b).Counter(), "xfer_out")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("read xfer_out of %s: %w", k.InBucket(0).Member(), err)
	}
	var sum int64
	for b, c := range cmds {
		v, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("bucket %d xfer_out: %w", b, err)
		}
		sum += v
	}
	return sum, nil
}

// readRecords reads step 2 of ReadSKUStock: every bucket's xfer_out and
// xfer_closed ids, their records, then their targets' markers (three
// pipelines), and counts them into s.
func (s *SKUStock) readRecords(ctx context.Context, rdb redis.Cmdable, k Keys, n int) error {
	lists := make([][2]*redis.StringSliceCmd, n)
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			lists[b] = [2]*redis.StringSliceCmd{p.ZRange(ctx, k.InBucket(b).TransfersOut(), 0, -1),
				p.ZRange(ctx, k.InBucket(b).TransfersClosed(), 0, -1)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("list transfers of %s: %w", k.InBucket(0).Member(), err)
	}
	type found struct {
		from   int
		closed bool
		id     string
		rec    *redis.MapStringStringCmd
		marker *redis.IntCmd
	}
	var all []*found
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, l := range lists {
			for i, c := range l {
				for _, id := range c.Val() {
					all = append(all, &found{from: b, closed: i == 1, id: id, rec: p.HGetAll(ctx, k.InBucket(b).Transfer(id))})
				}
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read transfer records of %s: %w", k.InBucket(0).Member(), err)
	}
	recs := make([]TransferRecord, len(all))
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, f := range all {
			if len(f.rec.Val()) == 0 { // expired, or a stray id
				continue
			}
			rec, err := parseTransfer(k.InBucket(f.from), f.id, f.rec.Val())
			if err != nil {
				return err
			}
			recs[i] = rec
			f.marker = p.Exists(ctx, k.InBucket(rec.To).TransferIn(f.id))
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read transfer markers of %s: %w", k.InBucket(0).Member(), err)
	}
	for i, f := range all {
		rec := recs[i]
		switch {
		case f.marker == nil:
		case !f.closed && rec.State == TransferSent:
			s.Sent++
			if f.marker.Val() == 0 {
				s.InFlightRecords += rec.K
				s.Pending = append(s.Pending, Transfer{From: f.from, TransferRecord: rec})
			}
		case f.closed && rec.State == TransferDone && f.marker.Val() == 0:
			s.Unmarked = append(s.Unmarked, Transfer{From: f.from, TransferRecord: rec})
		}
	}
	return nil
}
