package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// NewClient returns a keep-alive HTTP client for a load of concurrency
// workers against one host: one idle connection kept per worker, no proxy,
// no compression.
func NewClient(concurrency int, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency * 2,
		MaxConnsPerHost:     concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout}
}

// Load is one closed-loop load phase: Concurrency workers share Requests
// requests; each worker sends its next request as soon as the previous
// answer is read.
type Load struct {
	Client      *http.Client
	Method      string
	URL         string
	Requests    int
	Concurrency int
	// Header sets the headers of request i (0 <= i < Requests), e.g. its
	// bearer token and Idempotency-Key. Precompute what it needs: it runs on
	// the measured path.
	Header func(i int, h http.Header)
	// Expect tells whether an answer is the expected one.
	Expect func(status int, body []byte) bool
	// MaxUnexpected stops the phase early after this many unexpected answers
	// or transport errors (0: 50).
	MaxUnexpected int
	// Progress, if set, is called about every ProgressEvery with the count done.
	Progress      func(done int, elapsed time.Duration)
	ProgressEvery time.Duration
	// Rate, if positive, paces the load (requests per second): request i
	// is sent no earlier than i/Rate after the start, by whichever worker is
	// free (open loop while one is). Latency is still measured from the send.
	Rate float64
}

// LoadResult is what a Load measured.
type LoadResult struct {
	Requests   int           // answers received plus transport errors
	Expected   int           // answers Expect accepted
	Unexpected int           // other answers and transport errors
	Status     map[int]int   // answers by HTTP status; transport errors under 0
	Samples    []string      // up to 5 examples of unexpected outcomes
	Elapsed    time.Duration // first request sent to last answer read
	Latencies  []time.Duration
	Stopped    string // why the phase ended early, if it did
}

// loadRun is the state the workers of one Run share.
type loadRun struct {
	l                   Load
	maxBad              int
	lat                 []time.Duration
	done                []bool
	next, finished, bad atomic.Int64
	outs                []loadWorker
	start               time.Time
	stopOnce            sync.Once
	stopped             string
	cancel              context.CancelFunc
}

// loadWorker is what one worker saw.
type loadWorker struct {
	status   map[int]int
	expected int
	bad      int
	samples  []string
}

func (r *loadRun) stop(why string) {
	r.stopOnce.Do(func() { r.stopped = why; r.cancel() })
}

// Run drives the load until every request is answered, ctx ends, or too many
// unexpected answers arrive.
func (l Load) Run(ctx context.Context) LoadResult {
	maxBad := l.MaxUnexpected
	if maxBad <= 0 {
		maxBad = 50
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &loadRun{l: l, maxBad: maxBad, lat: make([]time.Duration, l.Requests), done: make([]bool, l.Requests),
		outs: make([]loadWorker, l.Concurrency), cancel: cancel}

	start := time.Now()
	r.start = start
	var progressWG sync.WaitGroup
	if l.Progress != nil && l.ProgressEvery > 0 {
		progressWG.Add(1)
		go func() {
			defer progressWG.Done()
			r.progress(ctx, start)
		}()
	}

	var wg sync.WaitGroup
	for w := 0; w < l.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r.outs[w] = r.work(ctx)
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cancel()
	progressWG.Wait()
	if r.stopped == "" && ctx.Err() != nil && int(r.finished.Load()) < l.Requests {
		r.stopped = "context ended"
	}
	return r.result(elapsed)
}

// progress calls Progress every ProgressEvery until ctx ends.
func (r *loadRun) progress(ctx context.Context, start time.Time) {
	t := time.NewTicker(r.l.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.l.Progress(int(r.finished.Load()), time.Since(start))
		}
	}
}

// work is one worker: it sends the next request as soon as the previous
// answer is read, until the requests run out or the run stops.
func (r *loadRun) work(ctx context.Context) loadWorker {
	l := r.l
	o := loadWorker{status: map[int]int{}}
	buf := make([]byte, 0, 1024)
	for {
		i := int(r.next.Add(1)) - 1
		if i >= l.Requests || ctx.Err() != nil {
			break
		}
		if l.Rate > 0 && !r.pace(ctx, i) {
			break
		}
		req, err := http.NewRequestWithContext(ctx, l.Method, l.URL, nil)
		if err != nil {
			r.stop("build request: " + err.Error())
			break
		}
		l.Header(i, req.Header)
		t0 := time.Now()
		resp, err := l.Client.Do(req)
		var status int
		if err == nil {
			buf, err = readBody(resp.Body, buf[:0])
			status = resp.StatusCode
		}
		r.lat[i] = time.Since(t0)
		if ctx.Err() != nil && err != nil {
			break // cancelled: not an outcome of the server
		}
		r.done[i] = true
		r.finished.Add(1)
		o.status[status]++
		if err == nil && l.Expect(status, buf) {
			o.expected++
			continue
		}
		o.bad++
		if len(o.samples) < 5 {
			if err != nil {
				o.samples = append(o.samples, "transport: "+err.Error())
			} else {
				o.samples = append(o.samples, fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(buf))))
			}
		}
		if r.bad.Add(1) >= int64(r.maxBad) {
			r.stop(fmt.Sprintf("%d unexpected answers", r.maxBad))
		}
	}
	return o
}

// pace waits for request i's slot on the schedule; false if ctx ended.
func (r *loadRun) pace(ctx context.Context, i int) bool {
	wait := time.Until(r.start.Add(time.Duration(float64(i) / r.l.Rate * float64(time.Second))))
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// result merges the workers' counts and the answered requests' latencies.
func (r *loadRun) result(elapsed time.Duration) LoadResult {
	res := LoadResult{Status: map[int]int{}, Elapsed: elapsed, Stopped: r.stopped}
	for _, o := range r.outs {
		for s, n := range o.status {
			res.Status[s] += n
		}
		res.Expected += o.expected
		res.Unexpected += o.bad
		for _, s := range o.samples {
			if len(res.Samples) < 5 {
				res.Samples = append(res.Samples, s)
			}
		}
	}
	res.Latencies = make([]time.Duration, 0, r.finished.Load())
	for i, ok := range r.done {
		if ok {
			res.Latencies = append(res.Latencies, r.lat[i])
		}
	}
	res.Requests = len(res.Latencies)
	return res
}

// readBody reads at most 4 KiB of the answer into buf and discards the rest,
// so the connection can be reused.
func readBody(body io.ReadCloser, buf []byte) ([]byte, error) {
	defer body.Close()
	for len(buf) < 4096 {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	_, err := io.Copy(io.Discard, body)
	return buf, err
}

// StatusText renders status counts as "202×99000 409×1000", transport errors as "error".
func StatusText(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := fmt.Sprint(k)
		if k == 0 {
			name = "error"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, m[k]))
	}
	return strings.Join(parts, " ")
}
