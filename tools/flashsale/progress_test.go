package flashsale

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	cases := map[[2]int64]string{{0, 10}: "[" + strings.Repeat(".", 30) + "]   0%", {5, 10}: "[" + strings.Repeat("#", 15) + strings.Repeat(".", 15) + "]  50%",
		{10, 10}: "[" + strings.Repeat("#", 30) + "] 100%", {12, 10}: "[" + strings.Repeat("#", 30) + "] 100%", {3, 0}: "[" + strings.Repeat("#", 30) + "] 100%"}
	for in, want := range cases {
		if got := bar(in[0], in[1]); got != want {
			t.Errorf("bar(%d, %d) = %q, want %q", in[0], in[1], got, want)
		}
	}
}

func TestProgressToAPipeIsThrottled(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	for i := range 100 {
		p.update("sagas", int64(i), 100, "")
	}
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Errorf("100 updates within 2 s wrote %d lines, want 1:\n%s", n, buf.String())
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("carriage return written to a pipe")
	}
}
