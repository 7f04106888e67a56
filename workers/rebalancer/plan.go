package rebalancer

// Bucket is one bucket of a SKU as the planner sees it.
type Bucket struct {
	Available int64
	// Hits is the counter's sold_out_hits: SOLD_OUT answers reserve.lua gave
	// on this bucket (a total; demand is its growth since the last tick).
	Hits int64
	// Absent: the bucket has no counter. It neither gives nor receives (a
	// give would be refused and leave the units in flight until it exists).
	Absent bool
}

// Move is one planned transfer of K units from bucket From to bucket To.
type Move struct {
	From, To int
	K        int64
}

// Plan decides a tick's transfers for one SKU, at most maxMoves, from the
// buckets' state now and each bucket's Hits at the last tick (prevHits; a
// bucket missing from it counts as 0). It is a pure function.
//
// A bucket receives when
//   - demand: it is empty and its Hits grew since the last tick (users of
//     this bucket were told SOLD_OUT), served first, the largest growth first;
//   - or evenness: its available*4 is below the richest bucket's available
//     and the richest has 2 or more, the poorest first.
//
// The giver is the richest bucket (available ≥ 1) that has not received in
// this plan; it gives K = max(1, (giver − receiver + 1)/2), which is never
// more than it has. A bucket receives at most once per plan by demand.
//
// No ping-pong without demand: an evenness move needs a gap of 2 or more and
// leaves the pair within 1 of each other, so it strictly lowers Σ available²
// while the total stays put; with no new SOLD_OUT hits the plans therefore
// reach a state where Plan returns nothing. The last unit of a SKU moves only
// to an empty bucket with new hits (and, in one plan, to one bucket only).
func Plan(cur []Bucket, prevHits []int64, maxMoves int) []Move {
	n := len(cur)
	avail := make([]int64, n)
	growth := make([]int64, n)
	received := make([]bool, n)
	for b, c := range cur {
		avail[b] = c.Available
		prev := int64(0)
		if b < len(prevHits) {
			prev = prevHits[b]
		}
		if !c.Absent && c.Available == 0 && c.Hits > prev {
			growth[b] = c.Hits - prev
		}
	}
	var moves []Move
	for len(moves) < maxMoves {
		from := -1
		for b := range n {
			if !cur[b].Absent && !received[b] && avail[b] >= 1 && (from < 0 || avail[b] > avail[from]) {
				from = b
			}
		}
		if from < 0 {
			break
		}
		to := receiver(cur, avail, growth, received, from)
		if to < 0 {
			break
		}
		k := max(1, (avail[from]-avail[to]+1)/2)
		avail[from] -= k
		avail[to] += k
		received[to] = true
		growth[to] = 0
		moves = append(moves, Move{From: from, To: to, K: k})
	}
	return moves
}

// receiver picks the bucket that receives from giver: demand first, then
// evenness; -1 if none.
func receiver(cur []Bucket, avail, growth []int64, received []bool, giver int) int {
	to := -1
	for b := range cur {
		if b != giver && growth[b] > 0 && avail[b] == 0 && (to < 0 || growth[b] > growth[to]) {
			to = b
		}
	}
	if to >= 0 || avail[giver] < 2 {
		return to
	}
	for b := range cur {
		if b != giver && !cur[b].Absent && avail[b]*4 < avail[giver] && (to < 0 || avail[b] < avail[to]) {
			to = b
		}
	}
	return to
}
