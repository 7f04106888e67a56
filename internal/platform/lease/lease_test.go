package lease

import (
	"testing"
	"time"
)

func TestSlackIsAFifthAtMostASecond(t *testing.T) {
	for _, c := range []struct{ lease, want time.Duration }{
		{time.Second, 200 * time.Millisecond}, {10 * time.Second, time.Second}, {30 * time.Second, time.Second},
		{100 * time.Millisecond, 20 * time.Millisecond},
	} {
		if got := Slack(c.lease); got != c.want {
			t.Errorf("Slack(%s) = %s, want %s", c.lease, got, c.want)
		}
	}
}

func TestCap(t *testing.T) {
	if got, cut := Cap(3*time.Second, 10*time.Second); got != 3*time.Second || cut {
		t.Errorf("Cap(3s, 10s) = %s, %v", got, cut)
	}
	if got, cut := Cap(time.Second, time.Second); got != 400*time.Millisecond || !cut {
		t.Errorf("Cap(1s, 1s) = %s, %v; want 400ms, cut", got, cut)
	}
	// A capped timeout still fits once after the claim.
	t0 := time.Unix(1000, 0)
	capped, _ := Cap(time.Hour, time.Second)
	if !Start(t0, time.Second).Fits(t0.Add(capped), capped) {
		t.Errorf("a capped timeout of %s does not fit after waiting as long", capped)
	}
}

func TestBudgetFits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := Start(t0, 10*time.Second) // deadline t0+9s
	if !b.Deadline().Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("deadline %s", b.Deadline())
	}
	for _, c := range []struct {
		at   time.Duration
		work time.Duration
		want bool
	}{{0, 3 * time.Second, true}, {6 * time.Second, 3 * time.Second, true}, {6*time.Second + time.Millisecond, 3 * time.Second, false},
		{9 * time.Second, 0, true}, {12 * time.Second, time.Second, false}} {
		if got := b.Fits(t0.Add(c.at), c.work); got != c.want {
			t.Errorf("work of %s at +%s fits: %v, want %v", c.work, c.at, got, c.want)
		}
	}
}
