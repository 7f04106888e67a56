package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Output of wrk 4.1.0 (Debian) with wrk.lua, 2 threads.
const wrkOut = `Running 30s test @ http://127.0.0.1:18777/r
  2 threads and 20 connections
seckill-wrk-thread-done 0
seckill-wrk-thread-done 1
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   173.46us  300.17us   5.19ms   95.30%
    Req/Sec   502.50      9.96   550.00     94.83%
  3000 requests in 3.02s, 410.16KB read
Requests/sec:    994.68
Transfer/sec:    135.99KB
seckill-wrk requests=3000 answered=3000 expected=2998 unexpected=2 duration_us=3016059 p50_us=110 p90_us=239 p99_us=1399 max_us=5190 mean_us=173.5 err_connect=0 err_read=1 err_write=0 err_timeout=3 err_status=2 status_202=2998 status_409=2
seckill-wrk-sample 409 {"code":"SOLD_OUT","message":"sold out"}
seckill-wrk-sample 409 {"code":"SOLD_OUT","message":"sold out"}
`

func TestParseWrkOutput(t *testing.T) {
	r, err := ParseWrkOutput(strings.NewReader(wrkOut))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 3000 || r.Answered != 3000 || r.Expected != 2998 || r.Unexpected != 2 || r.DurationUS != 3016059 {
		t.Fatalf("counts = %+v", r)
	}
	if r.P50US != 110 || r.P90US != 239 || r.P99US != 1399 || r.MaxUS != 5190 || r.MeanUS != 173.5 {
		t.Fatalf("latency = %+v", r)
	}
	if r.Status[202] != 2998 || r.Status[409] != 2 || len(r.Status) != 2 {
		t.Fatalf("status = %v", r.Status)
	}
	if r.SocketErrors() != 4 || r.Errors["status"] != 2 {
		t.Fatalf("errors = %v", r.Errors)
	}
	if len(r.Samples) != 2 || !strings.Contains(r.Samples[0], "SOLD_OUT") {
		t.Fatalf("samples = %q", r.Samples)
	}
}

func TestParseWrkOutputRefusesBadSummaries(t *testing.T) {
	line := "seckill-wrk requests=10 answered=10 expected=10 unexpected=0 duration_us=5 p50_us=1 p90_us=2 p99_us=3 max_us=4 mean_us=1.5 err_connect=0 err_read=0 err_write=0 err_timeout=0 err_status=0 status_202=10"
	if _, err := ParseWrkOutput(strings.NewReader(line)); err != nil {
		t.Fatalf("good line refused: %v", err)
	}
	for name, in := range map[string]string{
		"no summary":          "Running 1s test\nRequests/sec: 10\n",
		"two summaries":       line + "\n" + line,
		"statuses do not add": strings.Replace(line, "status_202=10", "status_202=9", 1),
		"expected+unexpected": strings.Replace(line, "unexpected=0", "unexpected=1", 1),
		"missing p99":         strings.Replace(line, " p99_us=3", "", 1),
		"not key=value":       line + " oops",
		"unknown field":       line + " speed=3",
		"negative count":      strings.Replace(line, "requests=10", "requests=-1", 1),
		"bad status code":     strings.Replace(line, "status_202", "status_ok", 1),
		"bad mean":            strings.Replace(line, "mean_us=1.5", "mean_us=fast", 1),
	} {
		if _, err := ParseWrkOutput(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWrkArgv(t *testing.T) {
	w := WrkRun{Path: "wrk", URL: "http://127.0.0.1:1/x", Threads: 2, Connections: 50, Rate: 1500, WantStatus: 202, WantCode: "QUEUED"}
	got := strings.Join(w.Argv("/tmp/s.lua", "/tmp/tokens", "deadbeef", 90*time.Second), " ")
	want := "wrk -t 2 -c 50 -d 90s --timeout 10s -s /tmp/s.lua http://127.0.0.1:1/x -- /tmp/tokens 2 deadbeef 1500.000 202:QUEUED"
	if got != want {
		t.Fatalf("argv = %q\nwant   %q", got, want)
	}
}

// wrkServer answers 202 QUEUED to a POST with an unseen token and an unseen
// UUID Idempotency-Key, 400 otherwise, and remembers what it saw.
type wrkServer struct {
	mu     sync.Mutex
	tokens map[string]bool
	keys   map[string]bool
	bad    []string
}

func (s *wrkServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	key := r.Header.Get("Idempotency-Key")
	_, uerr := uuid.Parse(key)
	s.mu.Lock()
	why := ""
	switch {
	case r.Method != http.MethodPost || r.ContentLength != 0:
		why = fmt.Sprintf("%s with %d bytes", r.Method, r.ContentLength)
	case tok == "" || s.tokens[tok]:
		why = "token missing or reused: " + tok
	case uerr != nil || len(key) != 36 || s.keys[key]:
		why = "key not a fresh UUID: " + key
	}
	s.tokens[tok], s.keys[key] = true, true
	if why != "" {
		s.bad = append(s.bad, why)
	}
	s.mu.Unlock()
	if why != "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"BAD"}`))
		return
	}
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"code":"QUEUED"}`))
}

// wrk.lua sends each token once, with a fresh UUID key, exactly N requests
// split over the threads, and paces them when asked.
func TestWrkScriptSendsEachTokenOnce(t *testing.T) {
	path, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk not on PATH (scripts/stack.sh up installs it)")
	}
	for _, tc := range []struct {
		name string
		n    int
		rate float64
	}{{"closed loop", 1001, 0}, {"paced", 600, 400}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &wrkServer{tokens: map[string]bool{}, keys: map[string]bool{}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			tokens := make([]string, tc.n)
			for i := range tokens {
				tokens[i] = fmt.Sprintf("token-%d", i)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			t0 := time.Now()
			res, err := WrkRun{Path: path, URL: srv.URL + "/r", Threads: 2, Connections: 8, Tokens: tokens, Rate: tc.rate,
				WantStatus: 202, WantCode: "QUEUED"}.Run(ctx)
			took := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.bad) > 0 {
				t.Fatalf("%d bad requests, e.g. %v", len(s.bad), s.bad[0])
			}
			if len(s.tokens) != tc.n || res.Answered != int64(tc.n) || res.Expected != int64(tc.n) || res.Status[202] != tc.n || res.Stopped != "" {
				t.Fatalf("server saw %d tokens; wrk: %+v", len(s.tokens), res)
			}
			if tc.rate > 0 && took < time.Duration(float64(tc.n-1)/tc.rate*0.8*float64(time.Second)) {
				t.Fatalf("%d requests paced at %.0f/s took %s", tc.n, tc.rate, took)
			}
			if res.CPU <= 0 || res.P99US <= 0 {
				t.Fatalf("no CPU or latency: %+v", res)
			}
		})
	}
}
