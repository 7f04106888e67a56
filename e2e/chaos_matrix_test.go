package e2e

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill/seckill/internal/platform/failpoint"
)

// Hosts says which process checks each matrix failpoint on its real path.
// after_pg_commit_before_ack is checked by two: the saga worker (CreateOrder
// committed, Temporal not told) and the starter (inbox committed, broker not
// acknowledged); the matrix alternates between them.
var Hosts = map[string][]string{
	failpoint.AfterRedisReserve:          {ProcAPI},
	failpoint.AfterMQSendBeforeRedisMark: {ProcAPI},
	failpoint.AfterInboxInsert:           {ProcSaga},
	failpoint.AfterPGStockDecrement:      {ProcSaga},
	failpoint.AfterOrderInsert:           {ProcSaga},
	failpoint.AfterPGCommitBeforeAck:     {ProcSaga, ProcStarter},
	failpoint.DuringCommitResponse:       {ProcSaga},
	failpoint.AfterCompensationLua:       {ProcSaga},
	failpoint.AfterPaymentRecordInsert:   {ProcAPI},
	failpoint.AfterCancelPending:         {ProcSaga},
}

// MatrixOptions shape a crash-point matrix.
type MatrixOptions struct {
	// Failpoints to arm (default: failpoint.Seed, the ten of docs/spec.md#failpoints), Runs of each.
	Failpoints []string
	Runs       int
	// Pipeline: after a crash the process comes back armed for the next run
	// at once, while the sales already hit settle (faster, for the soak);
	// otherwise each run is crash, clean restart, settle, judge.
	Pipeline bool
	// Settle bounds how long a sale may take to settle after its last crash.
	Settle time.Duration
	// Reach bounds how long a run waits for its process to reach the failpoint.
	Reach    time.Duration
	Progress io.Writer
}

// PointResult is one failpoint's row of the report.
type PointResult struct {
	Failpoint  string          `json:"failpoint"`
	Hosts      []string        `json:"hosts"`
	Runs       int             `json:"runs"`
	Crashes    int             `json:"crashes"`
	Sales      int             `json:"sales"`
	Violations []string        `json:"violations"`
	Converge   []time.Duration `json:"-"`
	P50        time.Duration   `json:"converge_p50"`
	P99        time.Duration   `json:"converge_p99"`
	Errors     []string        `json:"errors"`
	// Callers: what the gateway's callers saw during a freeze (freeze.go),
	// of reserve and read requests and of the others.
	Callers      *CallerStats `json:"callers,omitempty"`
	OtherCallers *CallerStats `json:"other_callers,omitempty"`
}

// Report is a whole matrix or soak.
type Report struct {
	Started   time.Time      `json:"started"`
	Duration  time.Duration  `json:"duration"`
	Rows      []*PointResult `json:"rows"`
	Leftovers []string       `json:"leftovers"`
}

// Violations counts every violation in the report.
func (r Report) Violations() int {
	n := len(r.Leftovers)
	for _, row := range r.Rows {
		n += len(row.Violations) + len(row.Errors)
	}
	return n
}

// Matrix runs every failpoint opts.Runs times on the cluster (started),
// then waits for every sale to settle and judges each.
func Matrix(ctx context.Context, c *Cluster, o MatrixOptions) (Report, error) {
	if len(o.Failpoints) == 0 {
		o.Failpoints = failpoint.Seed
	}
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if o.Settle <= 0 {
		o.Settle = 2 * time.Minute
	}
	if o.Reach <= 0 {
		o.Reach = time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	rep := Report{Started: time.Now()}
	t := newTracker(ctx, c, o.Settle)
	for _, fp := range o.Failpoints {
		hosts, ok := Hosts[fp]
		if !ok {
			return rep, fmt.Errorf("failpoint %q has no host process (known: %v)", fp, failpoint.Seed)
		}
		row := &PointResult{Failpoint: fp, Hosts: hosts}
		rep.Rows = append(rep.Rows, row)
		if err := c.runPoint(ctx, o, row, t); err != nil {
			return rep, err
		}
		fmt.Fprintf(o.Progress, "chaos: %s: %d runs, %d crashes, %d errors (%s)\n", fp, row.Runs, row.Crashes, len(row.Errors),
			time.Since(rep.Started).Round(time.Second))
	}
	t.finish()
	left, err := c.Leftovers(ctx)
	if err != nil {
		return rep, err
	}
	rep.Leftovers = left
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// tracker plays sales and collects their outcome into the rows that
// started them.
type tracker struct {
	ctx    context.Context
	c      *Cluster
	settle time.Duration
	next   atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	sales  []*Sale
	rowOf  map[*Sale]*PointResult
	// slots bounds the sales settling at once (the dev server's SQLite is
	// the stack's narrowest part).
	slots chan struct{}
}

// maxSettling bounds the sales in flight.
const maxSettling = 6

func newTracker(ctx context.Context, c *Cluster, settle time.Duration) *tracker {
	t := &tracker{ctx: ctx, c: c, settle: settle, rowOf: map[*Sale]*PointResult{}, slots: make(chan struct{}, maxSettling)}
	t.next.Store(time.Now().UnixMilli())
	return t
}

// sale starts a sale for row once fewer than maxSettling are in flight; the
// returned channel closes when it settled (or gave up). It starts none (nil)
// if stop closes first: the sales in flight got the host to its failpoint.
func (t *tracker) sale(row *PointResult, stop <-chan struct{}) (*Sale, <-chan struct{}) {
	select {
	case t.slots <- struct{}{}:
	case <-stop:
		return nil, nil
	case <-t.ctx.Done():
		return nil, nil
	}
	s := &Sale{ActivityID: t.next.Add(1), Started: time.Now(), Codes: map[int]int{}}
	t.mu.Lock()
	t.sales = append(t.sales, s)
	t.rowOf[s] = row
	t.mu.Unlock()
	done := make(chan struct{})
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(done)
		defer func() { <-t.slots }()
		if err := t.c.Drive(t.ctx, s); err != nil && t.ctx.Err() == nil {
			s.Err = err
		}
		if err := t.c.AwaitSettled(t.ctx, s, t.settle); err != nil && t.ctx.Err() == nil {
			s.Err = err
		}
	}()
	return s, done
}

// disturb marks every unsettled sale as hit at at.
func (t *tracker) disturb(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.sales {
		s.Disturb(at)
	}
}

// finish waits for every sale and puts its outcome in its row.
// count adds a sale that ran in this row's disturbance: its error, its
// violations and its time to converge.
func (row *PointResult) count(s *Sale) {
	row.Sales++
	if s.Err != nil {
		row.Errors = append(row.Errors, fmt.Sprintf("sale %d: %v", s.ActivityID, s.Err))
	}
	for _, v := range s.Violations {
		row.Violations = append(row.Violations, fmt.Sprintf("sale %d: %s", s.ActivityID, v))
	}
	if _, conv := s.times(); !conv.IsZero() {
		row.Converge = append(row.Converge, s.ConvergeTime())
	}
}

func (t *tracker) finish() {
	t.wg.Wait()
	for _, s := range t.sales {
		t.rowOf[s].count(s)
	}
	for _, row := range t.rowOf {
		row.P50, row.P99 = percentile(row.Converge, 0.50), percentile(row.Converge, 0.99)
	}
}

// runPoint runs one failpoint's runs: each restarts the failpoint's host
// armed (unless the previous run left it armed), starts a sale, waits for
// the host to die at the failpoint, and starts it again.
func (c *Cluster) runPoint(ctx context.Context, o MatrixOptions, row *PointResult, t *tracker) error {
	dead := false // the host already died at the failpoint for this run
	armed := ""   // the host the previous run restarted armed
	for i := range o.Runs {
		host := c.Procs[row.Hosts[i%len(row.Hosts)]]
		row.Runs++
		if !dead && armed != host.Name {
			if err := host.Stop(); err != nil {
				return err
			}
			var err error
			if dead, err = startArmed(ctx, host, row.Failpoint+"=1:crash", row.Failpoint); err != nil {
				return err
			}
		}
		// A new sale only while the host is up armed: the sales in flight (at
		// most maxSettling) may need it to get anywhere.
		var settled <-chan struct{}
		if !dead {
			var err error
			if settled, err = awaitCrash(ctx, o, row, t, host, i); err != nil {
				return err
			}
		}
		dead, armed = false, ""
		if err := c.judgeRun(row, t, host, i); err != nil {
			return err
		}
		spec := ""
		if o.Pipeline && i+1 < o.Runs && row.Hosts[(i+1)%len(row.Hosts)] == host.Name {
			spec, armed = row.Failpoint+"=1:crash", host.Name
		}
		var err error
		if dead, err = startArmed(ctx, host, spec, row.Failpoint); err != nil {
			return err
		}
		if !o.Pipeline && settled != nil {
			select {
			case <-settled:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// startArmed starts host with failpoint spec; an armed incarnation may crash
// at the failpoint while it starts (a sale still settling hits it first):
// that is the next run's crash, reported as crashed=true.
func startArmed(ctx context.Context, host *Proc, spec, failpoint string) (crashed bool, err error) {
	for attempt := 1; ; attempt++ {
		err := host.Start(ctx, spec)
		if err == nil {
			return false, nil
		}
		if spec != "" && !host.Running() && host.Crashed() == failpoint {
			return true, nil
		}
		if attempt == 3 || ctx.Err() != nil {
			return false, err
		}
	}
}

// awaitCrash plays a new sale and waits (up to o.Reach) for the armed host
// to exit at the failpoint; it returns the channel closed when the sale
// settled.
func awaitCrash(ctx context.Context, o MatrixOptions, row *PointResult, t *tracker, host *Proc, i int) (<-chan struct{}, error) {
	exited := host.Exited()
	if exited == nil { // it died already
		gone := make(chan struct{})
		close(gone)
		exited = gone
	}
	s, settled := t.sale(row, exited)
	select {
	case <-exited:
	case <-time.After(o.Reach):
		sale := int64(0) // the sale settles concurrently: name it, never print its fields
		if s != nil {
			sale = s.ActivityID
		}
		row.Errors = append(row.Errors, fmt.Sprintf("run %d: %s never reached %s within %s (sale %d)", i+1, host.Name, row.Failpoint, o.Reach, sale))
	case <-ctx.Done():
		return settled, ctx.Err()
	}
	return settled, nil
}

// judgeRun stops a host that is still up, or counts the crash of one that
// died (at the failpoint or not) as a disturbance of the sales in flight.
func (c *Cluster) judgeRun(row *PointResult, t *tracker, host *Proc, i int) error {
	if host.Running() {
		return host.Stop()
	}
	at := time.Now()
	if got := host.Crashed(); got == row.Failpoint {
		row.Crashes++
	} else {
		row.Errors = append(row.Errors, fmt.Sprintf("run %d: %s died without crashing at %s (%q); its log ends:\n%s",
			i+1, host.Name, row.Failpoint, got, c.tail(host.Name, 15)))
	}
	t.disturb(at)
	return nil
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Print writes the report as a table, then every violation and error.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%-32s %-28s %6s %8s %6s %10s %7s %9s %9s\n", "failpoint", "process", "runs", "crashes", "sales", "violations", "errors", "p50", "p99")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%-32s %-28s %6d %8d %6d %10d %7d %9s %9s\n", row.Failpoint, strings.Join(row.Hosts, ","), row.Runs, row.Crashes,
			row.Sales, len(row.Violations), len(row.Errors), row.P50.Round(10*time.Millisecond), row.P99.Round(10*time.Millisecond))
	}
	fmt.Fprintf(w, "total %s, %d violations\n", r.Duration.Round(time.Second), r.Violations())
	for _, row := range r.Rows {
		if row.Callers != nil {
			fmt.Fprintf(w, "during %s: reserve and reads %s; set-up, payment, cancel %s\n", row.Failpoint, row.Callers, row.OtherCallers)
		}
	}
	for _, row := range r.Rows {
		for _, v := range row.Violations {
			fmt.Fprintf(w, "VIOLATION %s: %s\n", row.Failpoint, v)
		}
		for _, e := range row.Errors {
			fmt.Fprintf(w, "ERROR %s: %s\n", row.Failpoint, e)
		}
	}
	for _, l := range r.Leftovers {
		fmt.Fprintf(w, "LEFTOVER %s\n", l)
	}
}
