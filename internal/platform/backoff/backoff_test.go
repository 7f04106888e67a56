package backoff

import (
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	cases := []struct {
		attempt int
		want    time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 30 * time.Second}, {1 << 20, 30 * time.Second}}
	for _, c := range cases {
		if got := Exponential(time.Second, 30*time.Second, c.attempt); got != c.want {
			t.Errorf("attempt %d: %s, want %s", c.attempt, got, c.want)
		}
	}
}
