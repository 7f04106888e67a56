package bench

// CPU windows of the order legs: the machine's, this process's and every
// other process's CPU time between two snapshots, per operation.

import (
	"os"
	"time"
)

// CPUWindow is a CPU snapshot of the machine and every process at the start
// of a leg.
type CPUWindow struct {
	at          time.Time
	busy, total float64 // seconds of all CPUs (ReadMachineCPU)
	procs       ProcTicks
	// children is the CPU of each process's waited-for children (cutime +
	// cstime): PostgreSQL backends that connect and exit within a leg
	// (pgbench's) are seen through the postmaster's.
	children ProcTicks
}

// StartCPUWindow takes the first snapshot.
func StartCPUWindow() CPUWindow {
	w := CPUWindow{at: time.Now(), procs: ReadProcTicks(), children: readChildTicks()}
	w.busy, w.total, _ = ReadMachineCPU()
	return w
}

// LegCPU is where the machine's CPU went during one leg, per operation.
type LegCPU struct {
	// MachineBusyPct is the share of all CPUs that was busy.
	MachineBusyPct float64 `json:"machine_busy_pct"`
	// MachineUS is the machine's CPU time per operation, µs of one core.
	MachineUS float64 `json:"machine_us_per_op"`
	// OffPathPct is the share of the machine used by processes that are not
	// on the leg's path (other people's work: noise) and by the kernel.
	OffPathPct float64 `json:"off_path_pct"`
	// TopProcesses are the busiest processes, µs of one core per operation.
	TopProcesses []ProcCost `json:"top_processes"`
}

// Stop takes the second snapshot and returns the CPU per operation over ops
// operations. self names this process; children are processes that ran
// and exited within the window (their CPU from rusage); participants are
// the process names on the leg's path.
func (w CPUWindow) Stop(ops int64, ncpu int, self string, children []ProcCPU, participants map[string]bool) LegCPU {
	end := CPUWindow{at: time.Now(), procs: ReadProcTicks(), children: readChildTicks()}
	end.busy, end.total, _ = ReadMachineCPU()
	return w.cost(end, ops, ncpu, os.Getpid(), self, children, participants)
}

func (w CPUWindow) cost(end CPUWindow, ops int64, ncpu, selfPID int, self string, children []ProcCPU, participants map[string]bool) LegCPU {
	rename := func(p ProcTicks) ProcTicks {
		if e, ok := p[selfPID]; ok && self != "" {
			e.Name = self
			p[selfPID] = e
		}
		return p
	}
	d := append(ProcDelta(rename(w.procs), rename(end.procs)), children...)
	// Children that exited within the window count under their parent's
	// name (the postmaster's are PostgreSQL backends). This process's are
	// left out: the caller passes them in children.
	by := map[string]float64{}
	for _, p := range d {
		by[p.Name] += p.Seconds
	}
	for pid, e := range end.children {
		prev, ok := w.children[pid]
		if pid == selfPID || !ok || prev.Ticks > e.Ticks {
			continue // this process, or a parent that started within the window
		}
		if dt := e.Ticks - prev.Ticks; dt > 0 {
			by[e.Name] += float64(dt) / ClockTicks
		}
	}
	d = d[:0]
	for n, sec := range by {
		d = append(d, ProcCPU{Name: n, Seconds: sec})
	}
	sortProcs(d)
	wall := end.at.Sub(w.at).Seconds()
	var c LegCPU
	var machine float64
	if dt := end.total - w.total; dt > 0 && wall > 0 {
		c.MachineBusyPct = 100 * (end.busy - w.busy) / dt
		machine = c.MachineBusyPct / 100 * float64(ncpu) * wall
	}
	var on float64
	for _, p := range d {
		if participants[p.Name] || p.Name == self {
			on += p.Seconds
		}
	}
	if wall > 0 && ncpu > 0 {
		c.OffPathPct = 100 * max(0, machine-on) / (wall * float64(ncpu))
	}
	if ops > 0 {
		c.MachineUS = machine * 1e6 / float64(ops)
		c.TopProcesses = TopProcs(d, int(ops), 6)
	}
	return c
}

func sortProcs(d []ProcCPU) {
	for i := 1; i < len(d); i++ { // insertion sort: a few dozen entries
		for j := i; j > 0 && (d[j].Seconds > d[j-1].Seconds || d[j].Seconds == d[j-1].Seconds && d[j].Name < d[j-1].Name); j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}
