package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/procfs"

	"github.com/seckill/seckill/internal/sale"
)

// A freeze is the other way a dependency fails: it stops answering and
// keeps its connections open (SIGSTOP), then carries on where it was
// (SIGCONT). The kill soak with KillOptions.Freeze freezes instead of
// killing. While a component is frozen a prober plays a client of its own
// against the gateway (a reservation and a status read every probeEvery),
// and every answer (the sales' and the prober's) is recorded: the report
// says what callers saw during each freeze, and how long the sales took to
// converge once it was over.

// probeEvery is the prober's pace during a freeze.
const probeEvery = 200 * time.Millisecond

// CallerStats is what the gateway's callers saw while a component was
// frozen: the HTTP requests that started during a freeze, the budgeted ones
// (reserve, reads) or the others.
type CallerStats struct {
	Requests int `json:"requests"`
	// Answered within the reserve/read budget's reach, by status class.
	OK          int `json:"ok"`             // 2xx, 3xx, 4xx: a definite answer
	Unavailable int `json:"unavailable"`    // 503, with Retry-After
	NoRetryHint int `json:"no_retry_after"` // 503 without Retry-After
	OtherErrors int `json:"other_5xx"`
	// NoAnswer: the connection failed or the client's timeout (5 s) passed.
	NoAnswer int           `json:"no_answer"`
	Max      time.Duration `json:"max"`
	P99      time.Duration `json:"p99"`
	took     []time.Duration
}

// call is one HTTP request a caller made.
type call struct {
	at, done   time.Time
	status     int // 0: no answer
	retryAfter bool
	// budgeted: a reserve or a read (reservation, order), which the gateway
	// answers within a budget; the rest (sale set-up, payment, cancel) have
	// the handler timeout.
	budgeted bool
}

// callLog keeps the calls made while recording is on (during freezes).
type callLog struct {
	mu    sync.Mutex
	on    bool
	calls []call
}

func (l *callLog) record(c call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.calls = append(l.calls, c)
	}
}

// window switches recording on and returns a function that switches it off
// and returns the calls that started before it was called.
func (l *callLog) window() func() []call {
	l.mu.Lock()
	l.on, l.calls = true, nil
	l.mu.Unlock()
	return func() []call {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.on = false
		return l.calls
	}
}

func (s *CallerStats) add(calls []call, from, to time.Time, budgeted bool) {
	for _, c := range calls {
		if c.at.Before(from) || c.at.After(to) || c.budgeted != budgeted {
			continue
		}
		s.Requests++
		d := c.done.Sub(c.at)
		s.took = append(s.took, d)
		s.Max = max(s.Max, d)
		switch {
		case c.status == 0:
			s.NoAnswer++
		case c.status == http.StatusServiceUnavailable && c.retryAfter:
			s.Unavailable++
		case c.status == http.StatusServiceUnavailable:
			s.NoRetryHint++
		case c.status >= 500:
			s.OtherErrors++
		default:
			s.OK++
		}
	}
	s.P99 = percentile(s.took, 0.99)
}

func (s *CallerStats) String() string {
	return fmt.Sprintf("%d requests: %d answered, %d 503 with Retry-After, %d 503 without, %d other 5xx, %d no answer in 5 s; max %s, p99 %s",
		s.Requests, s.OK, s.Unavailable, s.NoRetryHint, s.OtherErrors, s.NoAnswer, s.Max.Round(10*time.Millisecond), s.P99.Round(10*time.Millisecond))
}

// freeze SIGSTOPs comp for o.Freeze while the prober plays, then SIGCONTs
// it, and returns when it was resumed. The component is resumed whatever
// happens: by a deferred SIGCONT, and by a detached `sh` that sends SIGCONT
// a little later should this process die meanwhile.
func (c *Cluster) freeze(ctx context.Context, comp string, o KillOptions, row *PointResult) (resumed time.Time, err error) {
	signal, pids, err := c.freezer(comp, o)
	if err != nil {
		return time.Time{}, err
	}
	backstop := exec.Command("sh", "-c", fmt.Sprintf("sleep %d; kill -CONT %s 2>/dev/null", int(o.Freeze.Seconds())+3, strings.Join(pids, " "))) // #nosec G204 -- pids this program read from the stack's pid files
	backstop.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if len(pids) > 0 {
		if err := backstop.Start(); err != nil {
			return time.Time{}, fmt.Errorf("start the SIGCONT backstop: %w", err)
		}
		defer func() { _ = backstop.Process.Kill(); _ = backstop.Wait() }()
	}
	stop := c.calls.window()
	probeCtx, stopProbe := context.WithCancel(ctx)
	var probing sync.WaitGroup
	probing.Add(1)
	// The window opens before the prober's first request: one sent before
	// `at` and held by the freeze would count for no window at all.
	at := time.Now()
	go func() { defer probing.Done(); c.probe(probeCtx) }()
	if err := signal(syscall.SIGSTOP); err != nil {
		_ = signal(syscall.SIGCONT)
		stopProbe()
		probing.Wait()
		stop()
		return time.Time{}, fmt.Errorf("SIGSTOP %s: %w", comp, err)
	}
	werr := waitGone(ctx, o.Freeze)
	if err := signal(syscall.SIGCONT); err != nil {
		werr = fmt.Errorf("SIGCONT %s: %w", comp, err)
	}
	resumed = time.Now()
	// Requests sent during the freeze may still be waiting; the prober's
	// last ones have the client's timeout to end.
	stopProbe()
	probing.Wait()
	waitDone := time.Now().Add(6 * time.Second)
	for c.inFlight.Load() > 0 && time.Now().Before(waitDone) {
		_ = waitGone(ctx, 50*time.Millisecond)
	}
	calls := stop()
	row.Callers.add(calls, at, resumed, true)
	row.OtherCallers.add(calls, at, resumed, false)
	return resumed, werr
}

// freezer returns how to signal comp and the pids the backstop resumes:
// one of the cluster's processes (its process group), or a stack
// component's processes and all their descendants (PostgreSQL's backends,
// the broker's JVM under its script).
func (c *Cluster) freezer(comp string, o KillOptions) (func(syscall.Signal) error, []string, error) {
	if p, ok := c.Procs[comp]; ok {
		pids := make([]string, 0, 1)
		for _, pid := range p.Pids() {
			pids = append(pids, "-"+strconv.Itoa(pid)) // the process group
		}
		return p.Signal, pids, nil
	}
	var roots []int
	for _, name := range stackPids[comp] {
		pid, err := stackPid(o.StackDir, name)
		if err != nil {
			return nil, nil, err
		}
		roots = append(roots, pid)
	}
	all := withDescendants(roots)
	pids := make([]string, len(all))
	for i, p := range all {
		pids[i] = strconv.Itoa(p)
	}
	return func(sig syscall.Signal) error {
		var first error
		for _, p := range all { // parents first: a stopped parent forks no new child
			if err := syscall.Kill(p, sig); err != nil && first == nil && err != syscall.ESRCH {
				first = fmt.Errorf("signal %d: %w", p, err)
			}
		}
		return first
	}, pids, nil
}

// withDescendants is roots and every process below them, parents first.
func withDescendants(roots []int) []int {
	children := map[int][]int{}
	procs, _ := procfs.AllProcs()
	for _, p := range procs {
		if st, err := p.Stat(); err == nil {
			children[st.PPID] = append(children[st.PPID], p.PID)
		}
	}
	out := slices.Clone(roots)
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// probe reserves on a sale of its own (a new buyer each time) and reads the
// status of its last reservation, every probeEvery, until ctx ends. Each
// request is tried once: the answer, or its absence, is what it records.
func (c *Cluster) probe(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second}
	id := c.probeSale.Load()
	if id == 0 {
		return
	}
	var last string
	// A request under way when the freeze ends runs to its answer (or the
	// client's timeout): cancelling it would count as no answer.
	rctx := context.WithoutCancel(ctx)
	for user := int64(1); ctx.Err() == nil; user++ {
		tok, err := c.auth.Mint(int64(1)<<40+user, time.Hour)
		if err != nil {
			return
		}
		path := fmt.Sprintf("/v1/activities/%d/skus/%d/reservations", id, saleSKU)
		var out struct {
			ReservationID string `json:"reservation_id"`
		}
		if st, _ := c.once(rctx, hc, http.MethodPost, path, tok, uuid.NewString(), &out); st == http.StatusAccepted {
			last = out.ReservationID
		}
		if last != "" {
			_, _ = c.once(rctx, hc, http.MethodGet, path+"/"+last, tok, "", nil)
		}
		_ = waitGone(ctx, probeEvery)
	}
}

// setupProbeSale sets up the prober's sale: plenty of stock, orders that
// expire at once (they are cancelled and settle by themselves).
func (c *Cluster) setupProbeSale(ctx context.Context) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	now := time.Now()
	id := probeActivity + 1<<40 + int64(now.UnixNano()%1_000_000)
	def := sale.Activity{ActivityID: id, Name: "chaos freeze probe", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(24 * time.Hour),
		PaymentTimeoutSeconds: 1, OrderDeadlineSeconds: 30, SKUs: []sale.SKU{{SKUID: saleSKU, Stock: 100_000, PriceCents: 100}}}
	if _, err := c.call(ctx, hc, http.MethodPost, "/v1/admin/activities", c.cfg.AdminToken, "", def, http.StatusOK); err != nil {
		return fmt.Errorf("freeze probe sale: %w", err)
	}
	c.probeSale.Store(id)
	return nil
}

// do sends req, recording the call while the call log is on (freezes).
func (c *Cluster) do(hc *http.Client, req *http.Request) (*http.Response, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	rec := call{at: time.Now(), budgeted: req.Method == http.MethodGet || strings.HasSuffix(req.URL.Path, "/reservations")}
	resp, err := hc.Do(req)
	rec.done = time.Now()
	if err == nil {
		rec.status, rec.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After") != ""
	}
	c.calls.record(rec)
	return resp, err
}

// once sends one request, without retrying, and returns its status (0 when
// nothing answered), decoding a JSON answer into out.
func (c *Cluster) once(ctx context.Context, hc *http.Client, method, path, token, key string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.apiBase+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.do(hc, req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}
