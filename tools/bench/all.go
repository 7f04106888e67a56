package bench

// `seckill-dev bench all`: the reserve legs (RunReserve's report) and the order
// legs (RunOrder's, with the sagas and the plain workflows) in sequence, on
// a machine checked to be idle before each, and one table of every figure
// against its baseline in the same run and its target.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
)

// AllOptions are the settings of `seckill-dev bench all`.
type AllOptions struct {
	Reserve ReserveOptions
	Order   OrderOptions
	JSON    bool
	// Force runs on a busy machine; every row of the report is then flagged.
	Force bool
	// MaxBusyPct is the share of the machine (%, all CPUs) other work may use
	// before a leg (the stack idles at 5-10%).
	MaxBusyPct float64
	// Settle is how long to wait for the machine to quieten between legs
	// (the stack catching up with the last leg: deletions, AOF rewrites).
	Settle time.Duration
	// WaitIdle is how long to wait for an idle machine before the first leg.
	WaitIdle time.Duration
	// Details prints the two full reports after the table.
	Details bool
}

// Validate checks the options, the two benches' included.
func (o AllOptions) Validate() error {
	switch {
	case o.MaxBusyPct <= 0 || o.MaxBusyPct > 100:
		return errors.New("--max-busy must be between 0 and 100")
	case o.Settle < 0 || o.Settle > 10*time.Minute || o.WaitIdle < 0 || o.WaitIdle > 30*time.Minute:
		return errors.New("--settle must be between 0 and 10m, --wait-idle between 0 and 30m")
	}
	if err := o.Reserve.Validate(); err != nil {
		return err
	}
	return o.Order.Validate()
}

// AllReport is the result of one `seckill-dev bench all`.
type AllReport struct {
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	TookS    float64   `json:"took_s"`
	Commit   string    `json:"commit"`
	CPUs     int       `json:"cpus"`
	MaxBusy  float64   `json:"max_busy_pct"`
	Forced   bool      `json:"forced"`
	Busy     bool      `json:"busy"` // some check found the machine busy (with --force): every row is flagged
	Checks   []BusySample
	Rows     []AllRow     `json:"rows"`
	Reserve  *Report      `json:"reserve,omitempty"`
	Order    *OrderReport `json:"order,omitempty"`
	Failures []string     `json:"failures,omitempty"`
}

// allRun is the state of one run.
type allRun struct {
	o        AllOptions
	rep      *AllReport
	progress func(string, ...any)
}

// RunAll runs `seckill-dev bench all` against the stack sys describes: progress
// to stderr, the report to stdout.
func RunAll(ctx context.Context, sys config.Config, o AllOptions, stdout, stderr io.Writer) error {
	if err := o.Validate(); err != nil {
		return err
	}
	a := &allRun{o: o, progress: progressTo(stderr, "bench all: "), rep: &AllReport{Command: o.command(), Started: time.Now().UTC(),
		Commit: buildCommit(), CPUs: runtime.NumCPU(), MaxBusy: o.MaxBusyPct, Forced: o.Force}}
	rep := a.rep
	if err := a.check(ctx, "reserve legs", o.WaitIdle); err != nil {
		return err // refused before anything ran: no report
	}
	var err error
	if rep.Reserve, err = ReserveReport(ctx, sys, o.Reserve, stderr); err != nil {
		rep.Failures = append(rep.Failures, "reserve: "+err.Error())
	} else {
		rep.Failures = append(rep.Failures, prefixed("reserve: ", rep.Reserve.Failures)...)
	}
	if ctx.Err() == nil {
		if err := a.check(ctx, "order legs", o.Settle); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
		} else {
			ord := o.Order
			ord.Between = func(ctx context.Context, next string) error { return a.check(ctx, next, o.Settle) }
			if rep.Order, err = OrderRun(ctx, sys, ord, stderr); err != nil {
				rep.Failures = append(rep.Failures, "order: "+err.Error())
			} else {
				rep.Failures = append(rep.Failures, prefixed("order: ", rep.Order.Failures)...)
			}
		}
	}
	rep.TookS = time.Since(rep.Started).Seconds()
	rep.Rows = AllRows(rep.Reserve, rep.Order, rep.Busy, o.MaxBusyPct)
	return writeReport(stdout, o.JSON, rep, func(w io.Writer) { rep.WriteText(w, o.Details) }, &rep.Failures)
}

// check samples the machine before a leg, waiting up to wait for it to be
// idle enough; a busy machine stops the run unless --force, which flags it.
func (a *allRun) check(ctx context.Context, next string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		s, err := sampleBusy(ctx, 2*time.Second, a.o.MaxBusyPct)
		if err != nil {
			return fmt.Errorf("sample the machine before the %s: %w", next, err)
		}
		s.Before = next
		if !s.Busy || time.Now().After(deadline) {
			a.rep.Checks = append(a.rep.Checks, s)
			a.progress("before the %s: machine %.0f%% busy, %.0f%% besides the bench (%s)", next, s.MachinePct, s.OtherPct, strings.Join(s.Top, ", "))
			if !s.Busy {
				return nil
			}
			if !a.o.Force {
				return fmt.Errorf("the machine is %.0f%% busy with other work before the %s (more than --max-busy %.0f%%; busiest: %s): "+
					"not measuring; wait for it to be idle, or pass --force to run anyway with every figure flagged busy",
					s.OtherPct, next, a.o.MaxBusyPct, strings.Join(s.Top, ", "))
			}
			a.rep.Busy = true
			a.progress("--force: running on a busy machine; every figure is flagged busy")
			return nil
		}
		a.progress("before the %s: machine %.0f%% busy besides the bench (%s): waiting up to %s for it to settle",
			next, s.OtherPct, strings.Join(s.Top, ", "), time.Until(deadline).Round(time.Second))
	}
}

func prefixed(p string, ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, p+s)
	}
	return out
}

// command is the command line the options amount to.
func (o AllOptions) command() string {
	r, d := o.Reserve, o.Order
	s := fmt.Sprintf("seckill bench all --requests %d --concurrency %d --warmup %d --fixed-rate-duration %s"+
		" --order-concurrency %d --duration %s --sagas %d --starters %d --max-busy %.0f",
		r.Requests, r.Concurrency, r.Warmup, r.FixedRateDuration, d.Concurrency, d.Duration, d.Sagas, d.Starters, o.MaxBusyPct)
	if d.SkipBroker {
		s += " --skip-broker"
	}
	if o.Force {
		s += " --force"
	}
	return s
}

// buildCommit is the VCS revision the binary was built from ("+dirty" when
// the tree had changes); without one stamped (-buildvcs=false), that of the
// git work tree the bench runs in, marked "(work tree)"; else "unknown".
func buildCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return workTreeCommit()
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return workTreeCommit()
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}

func workTreeCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output() // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 { // #nosec G204 -- as above
		rev += "+dirty"
	}
	return rev + " (work tree)"
}
