package bench

import (
	"sort"
	"strings"

	"github.com/prometheus/procfs"
)

// ProcTicks is the CPU time (user + system, clock ticks) of every process,
// by pid, with a readable name.
type ProcTicks map[int]ProcEntry

// ProcEntry is one process in a ProcTicks snapshot.
type ProcEntry struct {
	Name  string
	Ticks uint64 // utime + stime, all threads
}

// ClockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux
// for every architecture Go supports).
const ClockTicks = 100

// ReadProcTicks snapshots utime + stime of every process (prometheus/procfs
// reads /proc/<pid>/stat); the stack's Java processes are told apart by
// their main class. Processes that vanish while it reads are skipped.
func ReadProcTicks() ProcTicks { return walkProcs(false) }

// readChildTicks reads cutime + cstime (the CPU of waited-for children) of
// every process that has any.
func readChildTicks() ProcTicks { return walkProcs(true) }

func walkProcs(children bool) ProcTicks {
	out := ProcTicks{}
	procs, err := procfs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		st, err := p.Stat()
		switch {
		case err != nil:
		case children && st.CUTime+st.CSTime > 0:
			out[p.PID] = ProcEntry{Name: st.Comm, Ticks: uint64(st.CUTime + st.CSTime)} // #nosec G115 -- positive
		case !children:
			out[p.PID] = ProcEntry{Name: procName(p, st.Comm), Ticks: uint64(st.UTime + st.STime)}
		}
	}
	return out
}

// procName tells the Java processes of the stack apart by their main class.
func procName(p procfs.Proc, comm string) string {
	if comm != "java" {
		return comm
	}
	cmdline, _ := p.CmdLine()
	switch c := strings.Join(cmdline, " "); {
	case strings.Contains(c, "BrokerStartup"):
		return "rocketmq-broker"
	case strings.Contains(c, "NamesrvStartup"):
		return "rocketmq-namesrv"
	}
	return comm
}

// ProcCPU is the CPU time one named group of processes used in an interval.
type ProcCPU struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"cpu_s"`
}

// ProcDelta groups the CPU time used between a and b by process name,
// largest first. Processes that started in between count from zero; those
// that started and ended in between are not seen at all.
func ProcDelta(a, b ProcTicks) []ProcCPU {
	by := map[string]uint64{}
	for pid, e := range b {
		prev, ok := a[pid]
		if !ok || prev.Ticks > e.Ticks {
			// Started in between, or the pid was reused. (A kernel
			// worker renames itself as its work changes: same process.)
			prev = ProcEntry{}
		}
		by[e.Name] += e.Ticks - prev.Ticks
	}
	out := make([]ProcCPU, 0, len(by))
	for n, t := range by {
		if t > 0 {
			out = append(out, ProcCPU{Name: n, Seconds: float64(t) / ClockTicks})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Seconds != out[j].Seconds {
			return out[i].Seconds > out[j].Seconds
		}
		return out[i].Name < out[j].Name
	})
	return out
}
