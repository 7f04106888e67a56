package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Case is one measured phase.
type Case struct {
	Name  string `json:"name"`  // e.g. "raw EVALSHA in-stock"
	Path  string `json:"path"`  // "raw" (redis-benchmark EVALSHA) or "http" (gateway)
	Stock string `json:"stock"` // "in-stock" or "sold-out"
	// Loadgen drove the case: "redis-benchmark" or "wrk".
	Loadgen string `json:"loadgen"`
	// TargetRPS is the pace of a fixed-rate case (0: closed loop).
	TargetRPS   float64 `json:"target_rps,omitempty"`
	Requests    int     `json:"requests"`
	Concurrency int     `json:"concurrency"`
	ElapsedS    float64 `json:"elapsed_s"`
	// RPS is requests answered per second; for in-stock cases every expected
	// answer is one reservation, so it is also reservations/s.
	RPS float64 `json:"requests_per_s"`
	// Reservations admitted by Redis during the phase (counter reserved_total delta).
	Reservations    int64   `json:"reservations"`
	ReservationsPS  float64 `json:"reservations_per_s"`
	P50MS           float64 `json:"p50_ms"`
	P90MS           float64 `json:"p90_ms,omitempty"`
	P99MS           float64 `json:"p99_ms"`
	MaxMS           float64 `json:"max_ms,omitempty"`
	LatencyMeasured bool    `json:"latency_measured"`
	Outcome         string  `json:"outcome"`
	CPU             CPUCost `json:"cpu"`
	// GatewayUS is the in-process gateway's CPU per request (µs of one
	// core) when an external load generator (wrk) drives it: then this
	// process runs the gateway alone.
	GatewayUS float64 `json:"gateway_us_per_req,omitempty"`
	// TopProcesses are the processes that used the most CPU during the
	// case, in µs of one core per request.
	TopProcesses []ProcCost `json:"top_processes"`
	// OtherWorkPct is the share of the machine (% of all CPUs) that processes
	// off the measured path used during the case: noise that lowers the figures.
	OtherWorkPct float64 `json:"other_work_pct"`
	// RedisSnapshots counts Redis AOF rewrites and RDB saves (forks) that
	// ran during the case.
	RedisSnapshots int64 `json:"redis_snapshots"`
	// RedisCommands is the commands Redis processed per request during the
	// case (a script call counts once; the workers' own polling is in it).
	RedisCommands float64 `json:"redis_commands_per_req"`
}

// ProcCost is one process group's CPU time per request.
type ProcCost struct {
	Name string  `json:"name"`
	US   float64 `json:"us_per_req"`
}

// TopProcs converts the largest k entries of d to µs per request over n requests.
func TopProcs(d []ProcCPU, n, k int) []ProcCost {
	out := make([]ProcCost, 0, k)
	for _, p := range d {
		if len(out) == k || n <= 0 {
			break
		}
		out = append(out, ProcCost{Name: p.Name, US: p.Seconds * 1e6 / float64(n)})
	}
	return out
}

// CPUCost is CPU time per request in microseconds of one core, and how busy
// the machine was.
type CPUCost struct {
	RedisUS       float64 `json:"redis_server_us_per_req"`
	ClientUS      float64 `json:"client_us_per_req"`        // redis-benchmark, or the gateway and wrk
	SelfUS        float64 `json:"bench_process_us_per_req"` // this process: the gateway
	ChildUS       float64 `json:"child_us_per_req"`         // redis-benchmark or wrk
	RestUS        float64 `json:"rest_us_per_req"`          // every other process and the kernel (RocketMQ broker, ...)
	MachineUS     float64 `json:"machine_us_per_req"`
	MachineBusyPc float64 `json:"machine_busy_pct"` // of all CPUs
}

// Cost converts a CPUUse over n requests.
func Cost(u CPUUse, n int, ncpu int) CPUCost {
	if n <= 0 {
		return CPUCost{}
	}
	us := func(s float64) float64 { return s * 1e6 / float64(n) }
	c := CPUCost{RedisUS: us(u.Redis), ClientUS: us(u.Self + u.Child), SelfUS: us(u.Self), ChildUS: us(u.Child),
		RestUS: us(u.Rest()), MachineUS: us(u.Machine)}
	if u.Wall > 0 && ncpu > 0 {
		c.MachineBusyPc = 100 * u.Machine / (u.Wall.Seconds() * float64(ncpu))
	}
	return c
}

// Ratio is a throughput ratio against its target.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Op     string  `json:"op"` // ">=", ">", "<" or "<="
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
}

// NewRatio computes num/den and checks it against the target.
func NewRatio(name string, num, den float64, op string, target float64) Ratio {
	r := Ratio{Name: name, Op: op, Target: target}
	if den > 0 {
		r.Value = num / den
	}
	switch op {
	case ">=":
		r.Met = den > 0 && r.Value >= target
	case ">":
		r.Met = den > 0 && r.Value > target
	case "<":
		r.Met = den > 0 && r.Value < target
	case "<=":
		r.Met = den > 0 && r.Value <= target
	}
	return r
}

// Report is the result of one bench run.
type Report struct {
	Command        string    `json:"command"`
	Started        time.Time `json:"started"`
	CPUs           int       `json:"cpus"`
	GOMAXPROCS     int       `json:"gomaxprocs"`
	MemGiB         float64   `json:"mem_gib"`
	RedisVersion   string    `json:"redis_version"`
	RedisBenchmark string    `json:"redis_benchmark"`
	ActivityID     int64     `json:"activity_id"`
	Requests       int       `json:"requests"`
	Concurrency    int       `json:"concurrency"`
	Warmup         int       `json:"warmup"`
	Wrk            string    `json:"wrk,omitempty"` // wrk's version line
	// BusyBeforePct is how busy the machine was (% of all CPUs) in the second
	// before the first case: other work that will compete with the bench.
	BusyBeforePct float64  `json:"busy_before_pct"`
	Cases         []Case   `json:"cases"`
	Ratios        []Ratio  `json:"ratios"`
	Failures      []string `json:"failures,omitempty"`
	Notes         []string `json:"notes,omitempty"`
}

// Case returns the case named name, or nil.
func (r *Report) Case(name string) *Case {
	for i := range r.Cases {
		if r.Cases[i].Name == name {
			return &r.Cases[i]
		}
	}
	return nil
}

// WriteText prints the report as tables.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Command)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %.0f GiB; redis-server %s; %s\n",
		r.CPUs, r.GOMAXPROCS, r.MemGiB, r.RedisVersion, r.RedisBenchmark)
	fmt.Fprintf(w, "activity %d; %d requests per case after %d warm-up requests (HTTP cases only); machine %.0f%% busy before the run\n\n",
		r.ActivityID, r.Requests, r.Warmup, r.BusyBeforePct)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tloadgen\trequests\tconc\treq/s\treservations/s\tp50 ms\tp90 ms\tp99 ms\t")
	for _, c := range r.Cases {
		p50, p90, p99 := "n/a", "n/a", "n/a"
		if c.LatencyMeasured {
			p50, p99 = fmt.Sprintf("%.3f", c.P50MS), fmt.Sprintf("%.3f", c.P99MS)
			if c.P90MS > 0 {
				p90 = fmt.Sprintf("%.3f", c.P90MS)
			}
		}
		gen := c.Loadgen
		if c.TargetRPS > 0 {
			gen += fmt.Sprintf(" @%.0f/s", c.TargetRPS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t\n", c.Name, gen, c.Requests, c.Concurrency, c.RPS, c.ReservationsPS, p50, p90, p99)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, c := range r.Cases {
		fmt.Fprintf(w, "  %-26s %s\n", c.Name+":", c.Outcome)
	}
	fmt.Fprintln(w)
	r.writeCPU(w)
	writeRatioTable(w, r.Ratios)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "FAILED:")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	}
}

// writeCPU prints where the CPU went per request in each case.
func (r *Report) writeCPU(w io.Writer) {
	fmt.Fprintln(w, "CPU per request, µs of one core. bench = this process: the in-process gateway;")
	fmt.Fprintln(w, "child = redis-benchmark or wrk; rest = all")
	fmt.Fprintln(w, "other processes and the kernel (RocketMQ broker, ...); off-path = share of the machine used by")
	fmt.Fprintln(w, "processes not on the measured path (other people's work: noise):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tredis-server\tbench\tchild\trest\ttotal\tmachine busy\toff-path\t")
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f%%\t%.0f%%\t\n", c.Name, c.CPU.RedisUS, c.CPU.SelfUS, c.CPU.ChildUS,
			c.CPU.RestUS, c.CPU.MachineUS, c.CPU.MachineBusyPc, c.OtherWorkPct)
	}
	_ = tw.Flush()
	for _, c := range r.Cases {
		parts := make([]string, 0, len(c.TopProcesses))
		for _, p := range c.TopProcesses {
			parts = append(parts, fmt.Sprintf("%s %.1f", p.Name, p.US))
		}
		fmt.Fprintf(w, "  %-26s top processes (µs/req): %s\n", c.Name+":", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}

// MS converts a duration to milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// progressTo returns a progress printer: one line on w per call, prefixed.
func progressTo(w io.Writer, prefix string) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, prefix+format+"\n", args...)
	}
}

// writeReport prints rep to stdout, as indented JSON or with text, and turns
// the run's failures into its error.
func writeReport(stdout io.Writer, asJSON bool, rep any, text func(io.Writer), failures *[]string) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		text(stdout)
	}
	if len(*failures) > 0 {
		return fmt.Errorf("bench failed: %s", strings.Join(*failures, "; "))
	}
	return nil
}

// writeRatioTable prints ratios against their targets (both benches' reports).
func writeRatioTable(w io.Writer, ratios []Ratio) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio\tvalue\ttarget\tmet")
	for _, q := range ratios {
		verdict := "yes"
		if !q.Met {
			verdict = "NO"
			if q.Target > 0 && q.Value > 0 && strings.HasPrefix(q.Op, ">") {
				verdict += fmt.Sprintf(" (%.0f%% of the target)", 100*q.Value/q.Target)
			}
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s %.2f\t%s\n", q.Name, q.Value, q.Op, q.Target, verdict)
	}
	_ = tw.Flush()
}
