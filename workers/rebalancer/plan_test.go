package rebalancer

import (
	"reflect"
	"testing"
)

func buckets(avail ...int64) []Bucket {
	out := make([]Bucket, len(avail))
	for i, a := range avail {
		out[i].Available = a
	}
	return out
}

func TestPlan(t *testing.T) {
	hit := func(bs []Bucket, b int, h int64) []Bucket { bs[b].Hits = h; return bs }
	for _, c := range []struct {
		name string
		cur  []Bucket
		prev []int64
		max  int
		want []Move
	}{
		{"balanced", buckets(5, 5, 4, 5), nil, 4, nil},
		{"one empty, rich giver: evenness", buckets(10, 0), nil, 4, []Move{{0, 1, 5}}},
		{"odd gap leaves the pair within 1", buckets(9, 0), nil, 4, []Move{{0, 1, 5}}},
		{"within a quarter: nothing", buckets(8, 2), nil, 4, nil},
		{"below a quarter", buckets(9, 2), nil, 4, []Move{{0, 1, 4}}},
		{"spread over several", buckets(100, 0, 0, 0), nil, 4, []Move{{0, 1, 50}, {0, 2, 25}, {0, 3, 13}}},
		{"bounded per tick", buckets(100, 0, 0, 0), nil, 1, []Move{{0, 1, 50}}},
		{"last unit, no demand: nothing", buckets(1, 0, 0, 0), nil, 4, nil},
		{"last unit, old hits only: nothing", hit(buckets(1, 0, 0, 0), 2, 7), []int64{0, 0, 7, 0}, 4, nil},
		{"last unit, new demand", hit(buckets(1, 0, 0, 0), 2, 8), []int64{0, 0, 7, 0}, 4, []Move{{0, 2, 1}}},
		{"first sight: hits count from 0", hit(buckets(0, 0, 1), 0, 3), nil, 4, []Move{{2, 0, 1}}},
		{"demand in two, one unit: one move, no bounce within the plan",
			hit(hit(buckets(1, 0, 0), 1, 2), 2, 5), []int64{0, 0, 0}, 4, []Move{{0, 2, 1}}},
		{"demand before evenness", hit(buckets(2, 1, 0), 2, 1), nil, 4, []Move{{0, 2, 1}}},
		{"demand on a bucket with stock is no demand", hit(buckets(1, 1), 1, 9), nil, 4, nil},
		{"absent bucket never receives", []Bucket{{Available: 10}, {Absent: true, Hits: 5}}, nil, 4, nil},
		{"no stock anywhere", hit(buckets(0, 0), 1, 3), nil, 4, nil},
	} {
		if got := Plan(c.cur, c.prev, c.max); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Plan = %v, want %v", c.name, got, c.want)
		}
	}
}

// Applying the plans tick after tick with no new hits always ends with no
// move (no ping-pong), conserves the total, and never makes a bucket negative.
func TestPlanSettlesWithoutDemand(t *testing.T) {
	for _, start := range [][]int64{{1, 0, 0, 0}, {0, 0, 0, 1}, {2, 0, 0, 0}, {3, 0, 0, 0, 0, 0, 0, 0}, {100, 0, 0, 0},
		{7, 1, 0, 30}, {64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		cur := buckets(start...)
		total := sum(cur)
		for tick := 0; ; tick++ {
			moves := Plan(cur, nil, 4)
			if len(moves) == 0 {
				break
			}
			if tick > 100 {
				t.Fatalf("%v: still moving after 100 ticks: %v", start, cur)
			}
			for _, m := range moves {
				cur[m.From].Available -= m.K
				cur[m.To].Available += m.K
				if cur[m.From].Available < 0 || m.K < 1 {
					t.Fatalf("%v: move %v leaves %v", start, m, cur)
				}
			}
		}
		if sum(cur) != total {
			t.Fatalf("%v: total %d -> %d", start, total, sum(cur))
		}
	}
}

func sum(bs []Bucket) (n int64) {
	for _, b := range bs {
		n += b.Available
	}
	return n
}
