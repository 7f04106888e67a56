package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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

// ReadProcTicks snapshots /proc/<pid>/stat of every process. Processes that
// vanish while it reads are skipped.
func ReadProcTicks() ProcTicks {
	return walkProcStats(ParseProcPIDStat, true)
}

// walkProcStats parses /proc/<pid>/stat of every process with parse,
// skipping processes that vanish. With named, the stack's Java processes are
// told apart by their main class; without, processes with no ticks are left out.
func walkProcStats(parse func(string) (string, uint64, error), named bool) ProcTicks {
	out := ProcTicks{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(d + "/stat") // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
		if err != nil {
			continue
		}
		comm, ticks, err := parse(string(raw))
		if err != nil {
			continue
		}
		if named {
			comm = procName(d, comm)
		} else if ticks == 0 {
			continue
		}
		out[pid] = ProcEntry{Name: comm, Ticks: ticks}
	}
	return out
}

// ParseProcPIDStat returns the command name and utime+stime of a
// /proc/<pid>/stat line. The name is in parentheses and may hold spaces.
func ParseProcPIDStat(s string) (comm string, ticks uint64, err error) {
	return procStatSum(s, 11, "utime/stime")
}

// ParseProcPIDChildStat returns the command name and cutime+cstime (the CPU
// of waited-for children) of a /proc/<pid>/stat line.
func ParseProcPIDChildStat(s string) (comm string, ticks uint64, err error) {
	return procStatSum(s, 13, "cutime/cstime")
}

// procStatSum returns the command name and the sum of the two fields at
// first and first+1 after the name (state is field 0: utime is 11, cutime 13).
func procStatSum(s string, first int, what string) (comm string, ticks uint64, err error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("not a /proc/<pid>/stat line: %q", s)
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	if len(f) < first+2 {
		return "", 0, fmt.Errorf("short /proc/<pid>/stat line: %q", s)
	}
	a, err1 := strconv.ParseUint(f[first], 10, 64)
	b, err2 := strconv.ParseUint(f[first+1], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("bad %s in %q", what, s)
	}
	return comm, a + b, nil
}

// procName tells the Java processes of the stack apart by their main class.
func procName(dir, comm string) string {
	if comm != "java" {
		return comm
	}
	cmdline, _ := os.ReadFile(dir + "/cmdline") // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
	switch c := string(cmdline); {
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
