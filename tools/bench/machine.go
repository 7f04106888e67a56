package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

func (e *benchEnv) sample(ctx context.Context) (CPUSample, error) {
	s := CPUSample{At: time.Now(), Self: SelfCPU(), Procs: ReadProcTicks()}
	if me, ok := s.Procs[os.Getpid()]; ok {
		me.Name = benchSelf
		s.Procs[os.Getpid()] = me
	}
	busy, total, err := ReadMachineCPU()
	if err != nil {
		return s, err
	}
	s.MachineBusy, s.MachineTotal = busy, total
	info, err := e.rdb.InfoMap(ctx, "cpu", "persistence", "stats").Result()
	if err != nil {
		return s, fmt.Errorf("redis INFO cpu persistence stats: %w", err)
	}
	s.RedisCommands, _ = strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
	rewrites, _ := strconv.ParseInt(info["Persistence"]["aof_rewrites"], 10, 64)
	saves, _ := strconv.ParseInt(info["Persistence"]["rdb_saves"], 10, 64)
	s.AOFRewrites = rewrites + saves
	s.Redis, s.RedisForks, err = RedisCPU(info["CPU"])
	return s, err
}

// benchSelf names this process (gateway + load generator) in process lists.
const benchSelf = "bench (this process)"

// benchParticipants are the processes on the measured paths; CPU used by
// any other process (and unattributed machine time) is other work that ran
// on the machine during a case and took cores from it.
var benchParticipants = map[string]bool{benchSelf: true, "redis-server": true, "redis-benchmark": true,
	"rocketmq-broker": true, "rocketmq-namesrv": true}

// otherWork is the share of the machine's capacity (%) used during a case by
// anything off the measured path: other processes (including ones that came
// and went between snapshots) and kernel time not charged to a process.
func otherWork(u CPUUse, d []ProcCPU, ncpu int) float64 {
	participants := u.Self + u.Child + u.RedisForks
	for _, p := range d {
		if benchParticipants[p.Name] && p.Name != benchSelf && p.Name != "redis-benchmark" {
			participants += p.Seconds
		}
	}
	if u.Wall <= 0 || ncpu <= 0 {
		return 0
	}
	return 100 * max(0, u.Machine-participants) / (u.Wall.Seconds() * float64(ncpu))
}

// account sets the case's CPU figures between s0 and s1 over n requests;
// child is the load generator's process (redis-benchmark, wrk), gone by s1.
func (c *Case) account(s0, s1 CPUSample, ncpu, n int, child string, childCPU time.Duration) {
	use, procs := Use(s0, s1, ncpu, childCPU), ProcDelta(s0.Procs, s1.Procs)
	if childCPU > 0 {
		procs = withChild(procs, child, childCPU)
	}
	c.CPU = Cost(use, n, ncpu)
	c.TopProcesses = topProcs(use, procs, n)
	c.OtherWorkPct = otherWork(use, procs, ncpu)
	c.RedisSnapshots = s1.AOFRewrites - s0.AOFRewrites
	if n > 0 {
		c.RedisCommands = float64(s1.RedisCommands-s0.RedisCommands) / float64(n)
	}
}

// topProcs lists the 5 busiest processes and, last, the machine time no
// listed-or-not process accounts for (processes that started and ended
// within the case, e.g. a compiler run by someone else, and kernel work).
func topProcs(u CPUUse, d []ProcCPU, n int) []ProcCost {
	if u.RedisForks > 0 {
		d = withChild(d, "redis-server forks (AOF rewrite)", time.Duration(u.RedisForks*float64(time.Second)))
	}
	var seen float64
	for _, p := range d {
		seen += p.Seconds
	}
	top := TopProcs(d, n, 5)
	if rest := u.Machine - seen; rest > 0 && n > 0 {
		top = append(top, ProcCost{Name: "unattributed", US: rest * 1e6 / float64(n)})
	}
	return top
}

// snapshots mentions Redis persistence forks (AOF rewrite, RDB save) that
// ran during a case: they take CPU and slow the main thread (copy-on-write).
func snapshots(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("; Redis AOF rewrites/RDB saves during the case: %d", n)
}

// withChild adds a child process that exited before the second snapshot.
func withChild(d []ProcCPU, name string, cpu time.Duration) []ProcCPU {
	d = append(d, ProcCPU{Name: name, Seconds: cpu.Seconds()})
	sort.SliceStable(d, func(i, j int) bool { return d[i].Seconds > d[j].Seconds })
	return d
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func memTotalGiB() float64 {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0
	}
	m, err := fs.Meminfo()
	if err != nil || m.MemTotal == nil {
		return 0
	}
	return float64(*m.MemTotal) / (1 << 20)
}

// waitForIdle waits up to d for the machine to be under 20% busy (shared
// machines); it starts anyway after d.
func waitForIdle(ctx context.Context, d time.Duration, progress func(string, ...any)) {
	if d <= 0 {
		return
	}
	deadline := time.Now().Add(d)
	for {
		s, err := sampleBusy(ctx, 2*time.Second, 20)
		busy := s.MachinePct
		if err != nil || busy < 20 {
			return
		}
		if time.Now().After(deadline) {
			progress("machine still %.0f%% busy after --wait-idle %s: starting anyway", busy, d)
			return
		}
		progress("machine %.0f%% busy: waiting for it to quieten", busy)
	}
}

// busyBefore measures how busy the machine is over a second before the run
// (0 if it cannot tell).
func busyBefore(ctx context.Context, cpus int, progress func(string, ...any)) float64 {
	s, err := sampleBusy(ctx, time.Second, 100)
	before := s.MachinePct
	if err != nil {
		return 0
	}
	progress("machine busy before the run: %.0f%% of %d CPUs", before, cpus)
	return before
}

// settleBusyPct is the share of the machine (%) other than this process
// above which the machine counts as busy: the stack idles at 5-10% here
// (docs/benchmarks.md), so more is someone else's work, or the stack still
// catching up with the bench's last leg.
const settleBusyPct = 25.0

// BusySample is one ~2 s look at the machine between legs.
type BusySample struct {
	At         time.Time `json:"at"`
	Before     string    `json:"before"`      // the leg that follows
	MachinePct float64   `json:"machine_pct"` // busy share of all CPUs
	// OtherPct is the busy share of all CPUs less this process (the
	// bench's gateway and workers, idle between legs).
	OtherPct float64 `json:"other_pct"`
	// Top are the busiest other processes, "name NN%" of one core.
	Top  []string `json:"top"`
	Busy bool     `json:"busy"` // OtherPct above the threshold
}

// sampleBusy watches /proc/stat and every process for d.
func sampleBusy(ctx context.Context, d time.Duration, threshold float64) (BusySample, error) {
	s := BusySample{At: time.Now()}
	b0, t0, err := ReadMachineCPU()
	if err != nil {
		return s, err
	}
	p0, self0 := ReadProcTicks(), SelfCPU()
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(d):
	}
	b1, t1, err := ReadMachineCPU()
	if err != nil || t1 <= t0 {
		return s, errors.Join(err, errors.New("no CPU time passed"))
	}
	p1, self1 := ReadProcTicks(), SelfCPU()
	wall, ncpu := time.Since(s.At).Seconds(), float64(runtime.NumCPU())
	s.MachinePct = 100 * (b1 - b0) / (t1 - t0)
	s.OtherPct = max(0, s.MachinePct-100*(self1-self0)/(wall*ncpu))
	delete(p0, os.Getpid())
	delete(p1, os.Getpid())
	for _, p := range ProcDelta(p0, p1) {
		if len(s.Top) == 3 || 100*p.Seconds/wall < 1 {
			break
		}
		s.Top = append(s.Top, fmt.Sprintf("%s %.0f%%", p.Name, 100*p.Seconds/wall))
	}
	s.Busy = s.OtherPct > threshold
	return s, nil
}

// settle waits up to maxWait for the machine (less this process) to be at
// most pct busy, sampling 2 s at a time; it returns the last share and
// whether it got there.
func settle(ctx context.Context, pct float64, maxWait time.Duration, progress func(string, ...any)) (float64, bool) {
	deadline := time.Now().Add(maxWait)
	for {
		s, err := sampleBusy(ctx, 2*time.Second, pct)
		if err != nil {
			return 0, false
		}
		if !s.Busy {
			return s.OtherPct, true
		}
		if time.Now().After(deadline) {
			return s.OtherPct, false
		}
		progress("machine %.0f%% busy besides the bench (%s): waiting for it to settle", s.OtherPct, strings.Join(s.Top, ", "))
	}
}
