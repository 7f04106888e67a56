package lua

// SKU is one (activity, sku) with the number of Redis stock buckets its
// admission uses (sku_inventory.buckets; 1 when not split) and, where the
// gateway read it, its sale's per-user cap (sale_activity.max_per_user).
type SKU struct {
	ActivityID int64
	SKUID      int64
	Buckets    int
	MaxPerUser int
}

// For is the Keys of userID's bucket.
func (s SKU) For(userID int64) Keys { return s.Bucket(BucketOf(userID, s.Buckets)) }

// Bucket is the Keys of bucket b.
func (s SKU) Bucket(b int) Keys { return Keys{ActivityID: s.ActivityID, SKUID: s.SKUID, Bucket: b} }

// All is the Keys of every bucket, bucket 0 first.
func (s SKU) All() []Keys {
	n := max(s.Buckets, 1)
	out := make([]Keys, n)
	for b := range out {
		out[b] = s.Bucket(b)
	}
	return out
}

// Split is the initial stock of each of n buckets for a SKU of stock units:
// as even as possible, the remainder in the lowest buckets.
func Split(stock int64, n int) []int64 {
	n = max(n, 1)
	out := make([]int64, n)
	for b := range out {
		out[b] = stock / int64(n)
		if int64(b) < stock%int64(n) {
			out[b]++
		}
	}
	return out
}
