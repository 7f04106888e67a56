package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Latency summarises latencies (client-side, request sent to answer read).
type Latency struct {
	P50, P99, Mean, Max time.Duration
}

// Summarize computes nearest-rank percentiles; it sorts a copy of d.
func Summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return Latency{P50: Percentile(s, 0.50), P99: Percentile(s, 0.99),
		Mean: sum / time.Duration(len(s)), Max: s[len(s)-1]}
}

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// CPUSample is a snapshot of CPU counters: the whole machine (/proc/stat),
// redis-server (INFO cpu) and this process (getrusage).
type CPUSample struct {
	At           time.Time
	MachineBusy  float64 // seconds not idle/iowait, all CPUs
	MachineTotal float64 // all seconds, all CPUs
	Redis        float64 // seconds, used_cpu_user + used_cpu_sys
	// RedisForks is used_cpu_user_children + used_cpu_sys_children: the CPU
	// of redis-server's finished forks (AOF rewrites, RDB saves).
	RedisForks  float64
	Self        float64 // seconds, user + system of this process
	Procs       ProcTicks
	AOFRewrites int64 // Redis aof_rewrites + rdb_saves (INFO persistence)
	// RedisCommands is total_commands_processed (INFO stats): every
	// client's commands, scripts counting once each.
	RedisCommands int64
}

// CPUUse is where CPU time went between two samples, in core-seconds.
type CPUUse struct {
	Wall    time.Duration
	Machine float64 // all processes
	Redis   float64 // redis-server (main process)
	// RedisForks is redis-server's forks that finished in the interval
	// (AOF rewrite, RDB save); part of Rest.
	RedisForks float64
	Self       float64 // this process (in-process gateway + load generator)
	Child      float64 // redis-benchmark, when it ran
}

// Rest is machine time spent outside redis-server, this process and the
// child: the RocketMQ broker, PostgreSQL, Temporal, the kernel's softirqs.
func (u CPUUse) Rest() float64 { return max(0, u.Machine-u.Redis-u.Self-u.Child) }

// Use returns the CPU time between a and b; ncpu converts the machine share.
func Use(a, b CPUSample, ncpu int, child time.Duration) CPUUse {
	u := CPUUse{Wall: b.At.Sub(a.At), Redis: b.Redis - a.Redis, RedisForks: b.RedisForks - a.RedisForks,
		Self: b.Self - a.Self, Child: child.Seconds()}
	if dt := b.MachineTotal - a.MachineTotal; dt > 0 {
		u.Machine = (b.MachineBusy - a.MachineBusy) / dt * float64(ncpu) * u.Wall.Seconds()
	}
	return u
}

// ReadMachineCPU reads the machine's CPU time, seconds of all CPUs, from
// /proc/stat (prometheus/procfs): busy is all but idle and iowait (guest
// time is already counted in user and nice).
func ReadMachineCPU() (busy, total float64, err error) {
	st, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, err
	}
	stat, err := st.Stat()
	if err != nil {
		return 0, 0, err
	}
	c := stat.CPUTotal
	busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return busy, busy + c.Idle + c.Iowait, nil
}

// SelfCPU returns this process's user + system time in seconds.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// RedisCPU reads used_cpu_user + used_cpu_sys (the server) and
// used_cpu_user_children + used_cpu_sys_children (its finished forks) from
// the INFO cpu section (go-redis's InfoMap parses INFO).
func RedisCPU(cpu map[string]string) (server, forks float64, err error) {
	var sums [2]float64
	for i, k := range []string{"used_cpu_user", "used_cpu_sys", "used_cpu_user_children", "used_cpu_sys_children"} {
		v, ok := cpu[k]
		if !ok && i < 2 {
			return 0, 0, fmt.Errorf("INFO cpu lacks %s", k)
		} else if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		sums[i/2] += f
	}
	return sums[0], sums[1], nil
}

// CommandStat reads calls and failed (failed_calls + rejected_calls) from
// one INFO commandstats value ("calls=…,usec=…,rejected_calls=…,failed_calls=…").
func CommandStat(v string) (calls, failed int64) {
	for _, kv := range strings.Split(v, ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "calls":
			calls = n
		case "failed_calls", "rejected_calls":
			failed += n
		}
	}
	return calls, failed
}
