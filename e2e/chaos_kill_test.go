package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Components of the stack the kill soak kills besides the cluster's own
// processes (their pid files are in .stack/pids, scripts/stack.sh up
// restarts them).
const (
	KillTemporal = "temporal"
	KillBroker   = "rocketmq"
	KillPostgres = "postgres"
	KillRedis    = "redis"
)

// KillTargets lists everything the soak can kill.
var KillTargets = []string{ProcAPI, ProcStarter, ProcSaga, ProcRest, KillTemporal, KillBroker, KillPostgres, KillRedis}

// stackPids are the pid files of each stack component; Temporal's is the
// real server's when the stack runs it (SECKILL_TEMPORAL=server, as make
// test-temporal-server does), else the dev server's.
var stackPids = map[string][]string{
	KillTemporal: {map[bool]string{true: "temporal-server", false: "temporal"}[os.Getenv("SECKILL_TEMPORAL") == "server"]},
	KillBroker:   {"rocketmq-broker", "rocketmq-namesrv"},
	KillPostgres: {"postgres"},
	KillRedis:    {"redis"},
}

// KillOptions shape a kill soak.
type KillOptions struct {
	Duration   time.Duration
	Every      time.Duration
	Components []string
	// StackScript is scripts/stack.sh, StackDir the stack's .stack directory.
	StackScript string
	StackDir    string
	Settle      time.Duration
	Progress    io.Writer
	// Freeze > 0 freezes instead of killing: SIGSTOP for this long, then
	// SIGCONT (freeze.go), and records what the gateway's callers saw.
	Freeze time.Duration
	// Rounds > 0 disturbs each component in turn, Rounds times over,
	// instead of a random one for Duration.
	Rounds int
}

// withDefaults checks the components and fills in the defaults.
func (o KillOptions) withDefaults() (KillOptions, error) {
	if len(o.Components) == 0 {
		o.Components = KillTargets
	}
	for _, comp := range o.Components {
		if !slices.Contains(KillTargets, comp) {
			return o, fmt.Errorf("unknown component %q (known: %s)", comp, strings.Join(KillTargets, ","))
		}
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Minute
	}
	if o.Every <= 0 {
		o.Every = 20 * time.Second
	}
	if o.Settle <= 0 {
		o.Settle = 3 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// soak is the state of one kill soak: the sales played and which component
// disturbed each last.
type soak struct {
	mu     sync.Mutex
	sales  []*Sale
	lastBy map[*Sale]string
	wg     sync.WaitGroup
	next   atomic.Int64
}

// Kill runs the kill soak on the cluster (started).
func Kill(ctx context.Context, c *Cluster, o KillOptions) (Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	rep := Report{Started: time.Now()}
	rows := map[string]*PointResult{}
	for _, comp := range o.Components {
		rows[comp] = &PointResult{Failpoint: "SIGKILL " + comp, Hosts: []string{comp}}
		if o.Freeze > 0 {
			rows[comp].Failpoint = fmt.Sprintf("SIGSTOP %s %s", o.Freeze, comp)
			rows[comp].Callers, rows[comp].OtherCallers = &CallerStats{}, &CallerStats{}
		}
		rep.Rows = append(rep.Rows, rows[comp])
	}
	if o.Freeze > 0 {
		if err := c.setupProbeSale(ctx); err != nil {
			return rep, err
		}
	}
	sk := &soak{lastBy: map[*Sale]string{}}
	sk.next.Store(time.Now().UnixMilli())

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go c.playSales(ctx, loadCtx, sk, o)
	if err := c.killLoop(ctx, sk, rows, o); err != nil {
		return rep, err
	}
	stopLoad()
	sk.wg.Wait()
	sk.tally(rows)
	for _, row := range rep.Rows {
		row.P50, row.P99 = percentile(row.Converge, 0.50), percentile(row.Converge, 0.99)
	}
	left, err := c.Leftovers(ctx)
	if err != nil {
		return rep, err
	}
	rep.Leftovers = left
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// playSales is the load: a new sale every second or so, at most four
// settling at once, until loadCtx ends.
func (c *Cluster) playSales(ctx, loadCtx context.Context, sk *soak, o KillOptions) {
	sem := make(chan struct{}, 4)
	for loadCtx.Err() == nil {
		select {
		case sem <- struct{}{}:
		case <-loadCtx.Done():
			return
		}
		s := &Sale{ActivityID: sk.next.Add(1), Started: time.Now(), Codes: map[int]int{}}
		sk.mu.Lock()
		sk.sales = append(sk.sales, s)
		sk.mu.Unlock()
		sk.wg.Add(1)
		go func() {
			defer sk.wg.Done()
			defer func() { <-sem }()
			if err := c.Drive(ctx, s); err != nil && ctx.Err() == nil {
				s.Err = err
			}
			if err := c.AwaitSettled(ctx, s, o.Settle+o.Duration); err != nil && ctx.Err() == nil {
				s.Err = err
			}
		}()
		_ = waitGone(loadCtx, time.Second)
	}
}

// killLoop kills a random component every o.Every (±50%) for o.Duration and
// marks every sale not yet converged as disturbed by it.
func (c *Cluster) killLoop(ctx context.Context, sk *soak, rows map[string]*PointResult, o KillOptions) error {
	end := time.Now().Add(o.Duration)
	for i := 0; (o.Rounds == 0 && time.Now().Before(end)) || i < o.Rounds*len(o.Components); i++ {
		wait := time.Duration(float64(o.Every) * (0.5 + rand.Float64())) // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
		if err := waitGone(ctx, wait); err != nil {
			return err
		}
		comp := o.Components[rand.IntN(len(o.Components))] // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
		if o.Rounds > 0 {
			comp = o.Components[i%len(o.Components)]
		}
		at, err := c.disturb(ctx, comp, o, rows[comp])
		if err != nil {
			rows[comp].Errors = append(rows[comp].Errors, err.Error())
		}
		rows[comp].Runs++
		rows[comp].Crashes++
		sk.mu.Lock()
		for _, s := range sk.sales {
			if _, conv := s.times(); conv.IsZero() {
				s.Disturb(at)
				sk.lastBy[s] = comp
			}
		}
		sk.mu.Unlock()
		fmt.Fprintf(o.Progress, "chaos: %s, back at %s\n", rows[comp].Failpoint, at.Format("15:04:05"))
	}
	return nil
}

// disturb kills comp and brings it back, or freezes it (o.Freeze), and
// returns the time the sales' convergence is counted from: the kill, or
// the end of the freeze.
func (c *Cluster) disturb(ctx context.Context, comp string, o KillOptions, row *PointResult) (time.Time, error) {
	if o.Freeze > 0 {
		at, err := c.freeze(ctx, comp, o, row)
		if at.IsZero() {
			at = time.Now()
		}
		return at, err
	}
	return time.Now(), c.kill(ctx, comp, o)
}

// tally charges each disturbed sale to the component that disturbed it last.
func (sk *soak) tally(rows map[string]*PointResult) {
	for _, s := range sk.sales {
		comp := sk.lastBy[s]
		if comp == "" {
			continue // never disturbed: load, not a run
		}
		rows[comp].count(s)
	}
}

// kill SIGKILLs comp, waits a random pause (up to 3 s) and brings it back.
func (c *Cluster) kill(ctx context.Context, comp string, o KillOptions) error {
	pause := time.Duration(rand.IntN(3000)) * time.Millisecond // #nosec G404 -- non-cryptographic randomness: jitter and test traffic, never a secret or an id
	if p, ok := c.Procs[comp]; ok {
		if err := p.Kill(syscall.SIGKILL); err != nil {
			return err
		}
		if err := waitGone(ctx, pause); err != nil {
			return err
		}
		for {
			err := p.Start(ctx, "")
			if err == nil {
				return nil
			}
			c.log.Warn("chaos.restart_failed", "process", comp, "error", err)
			if err := waitGone(ctx, 2*time.Second); err != nil {
				return err
			}
		}
	}
	killed := map[string]int{}
	for _, name := range stackPids[comp] {
		pid, err := stackPid(o.StackDir, name)
		if err != nil {
			return err
		}
		killed[name] = pid
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill %s (%d): %w", name, pid, err)
		}
		for syscall.Kill(pid, 0) == nil { // gone (a zombie of the stack script counts as gone)
			if isZombie(pid) || waitGone(ctx, 50*time.Millisecond) != nil {
				break
			}
		}
	}
	if err := waitGone(ctx, pause); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		out, err := exec.CommandContext(ctx, o.StackScript, "up").CombinedOutput() // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
		if err == nil {
			// The script must have started each process again: one that
			// still names the killed pid took the corpse for a live process.
			for name, old := range killed {
				if pid, perr := stackPid(o.StackDir, name); perr != nil || pid == old {
					err = fmt.Errorf("%s was not started again (pid file %d, killed %d, %v)", name, pid, old, perr)
				}
			}
		}
		if err == nil {
			return nil
		}
		if attempt == 5 || ctx.Err() != nil {
			return fmt.Errorf("scripts/stack.sh up after killing %s: %v: %s", comp, err, lastLines(string(out), 5))
		}
		_ = waitGone(ctx, 2*time.Second)
	}
}

// stackPid reads the pid file scripts/stack.sh keeps for name.
func stackPid(stackDir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(stackDir, "pids", name+".pid")) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
	if err != nil {
		return 0, fmt.Errorf("pid of %s: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid of %s: %w", name, err)
	}
	return pid, nil
}

func isZombie(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return true
	}
	st, err := p.Stat()
	return err != nil || st.State == "Z"
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
