package bench

// The report of `seckill-dev bench order`: one record per leg, printed as
// tables or JSON.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// OrderLeg is one measured leg of the order bench.
type OrderLeg struct {
	Name        string  `json:"name"`
	Ops         int64   `json:"ops"`
	Concurrency int     `json:"concurrency"`
	ElapsedS    float64 `json:"elapsed_s"`
	PerS        float64 `json:"ops_per_s"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	MeanMS      float64 `json:"mean_ms"`
	// LatencyMeasured is false when the leg has no per-operation latency.
	LatencyMeasured bool   `json:"latency_measured"`
	Outcome         string `json:"outcome"`
	CPU             LegCPU `json:"cpu"`
	// Waits is what the leg's PostgreSQL backends were doing, sampled.
	Waits []WaitShare `json:"pg_waits,omitempty"`
}

// SagaLeg is leg (c): sagas end to end from a backlog of reservations.
type SagaLeg struct {
	Sagas    int `json:"sagas"`
	Starters int `json:"starters"`
	// ReserveS is how long reserving the backlog in Redis took (not measured
	// as part of the drain: the reservations are the backlog).
	ReserveS float64 `json:"reserve_s"`
	// StartS: first start to last start accepted by Temporal.
	StartS   float64 `json:"start_s"`
	StartsPS float64 `json:"starts_per_s"`
	// CreatedS: first start until every order exists in PostgreSQL.
	CreatedS float64 `json:"orders_created_s"`
	// DrainS: first start until every order exists and is projected onto
	// Redis (open_reserved back to 0): the drain time of the backlog.
	DrainS  float64 `json:"drain_s"`
	SagasPS float64 `json:"sagas_per_s"`
	// SteadyPS is the completion rate between 10% and 90% of the backlog.
	SteadyPS float64 `json:"steady_sagas_per_s"`
	// Milestones: seconds after the first start at which 10/50/90/100% of the
	// orders were created.
	Milestones map[string]float64 `json:"milestones_s"`
	// TerminateS is how long terminating the waiting sagas took (clean-up).
	TerminateS float64 `json:"terminate_s"`
	Terminated int     `json:"terminated"`
	Outcome    string  `json:"outcome"`
	CPU        LegCPU  `json:"cpu"`
	// History is the forward path's shape in Temporal, per saga.
	History *HistoryShape `json:"history,omitempty"`
	// Requests is the gRPC requests this process's Temporal client made
	// per saga during the drain (starts, polls, task completions).
	Requests float64 `json:"temporal_requests_per_saga"`
}

// BrokerLeg is the RocketMQ leg: the backlog's messages produced to the
// bench topic and consumed back by a fresh consumer group.
type BrokerLeg struct {
	Messages            int     `json:"messages"`
	Producers           int     `json:"producers"`
	ProduceS            float64 `json:"produce_s"`
	ProducePS           float64 `json:"produce_per_s"`
	ConsumerConcurrency int     `json:"consumer_concurrency"`
	// ConsumeS: consumer start to the last of the messages received.
	ConsumeS  float64 `json:"consume_s"`
	ConsumePS float64 `json:"consume_per_s"`
	Group     string  `json:"group"`
	Outcome   string  `json:"outcome"`
	Produce   LegCPU  `json:"produce_cpu"`
	Consume   LegCPU  `json:"consume_cpu"`
}

// OrderReport is the result of one `seckill-dev bench order` run.
type OrderReport struct {
	Command        string     `json:"command"`
	Started        time.Time  `json:"started"`
	CPUs           int        `json:"cpus"`
	GOMAXPROCS     int        `json:"gomaxprocs"`
	MemGiB         float64    `json:"mem_gib"`
	PGVersion      string     `json:"postgres_version"`
	PGBenchVersion string     `json:"pgbench_version"`
	Database       string     `json:"scratch_database"`
	ActivityID     int64      `json:"activity_id"`
	TaskQueue      string     `json:"task_queue"`
	Concurrency    int        `json:"concurrency"`
	DurationS      float64    `json:"duration_s"`
	BusyBeforePct  float64    `json:"busy_before_pct"`
	PGBench        *OrderLeg  `json:"pgbench,omitempty"`
	CreateOrder    *OrderLeg  `json:"create_order,omitempty"`
	Broker         *BrokerLeg `json:"broker,omitempty"`
	Sagas          *SagaLeg   `json:"sagas,omitempty"`
	// Plain is leg (d), the baseline of (c): plain workflows of the saga's
	// shape (plain.go); its CreatedS is when every row was inserted.
	Plain    *SagaLeg `json:"plain_workflows,omitempty"`
	Ratios   []Ratio  `json:"ratios"`
	Notes    []string `json:"notes,omitempty"`
	Failures []string `json:"failures,omitempty"`
}

// WriteText prints the report as tables.
func (r *OrderReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Command)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %.0f GiB; PostgreSQL %s; %s\n", r.CPUs, r.GOMAXPROCS, r.MemGiB,
		r.PGVersion, r.PGBenchVersion)
	fmt.Fprintf(w, "scratch database %s; activity %d; task queue %s; machine %.0f%% busy before the run\n\n",
		r.Database, r.ActivityID, r.TaskQueue, r.BusyBeforePct)

	r.writeLegs(w)
	r.writeOutcomes(w)
	r.writeCPU(w)
	r.writeRatios(w)
}

// writeLegs prints one row per leg: ops, concurrency, rate and latency.
func (r *OrderReport) writeLegs(w io.Writer) {
	type row struct {
		name      string
		ops       int64
		conc      int
		elapsed   float64
		perS      float64
		lat       bool
		p50, p99  float64
		mean      float64
		meanKnown bool
	}
	var rows []row
	for _, l := range []*OrderLeg{r.PGBench, r.CreateOrder} {
		if l != nil {
			rows = append(rows, row{l.Name, l.Ops, l.Concurrency, l.ElapsedS, l.PerS, l.LatencyMeasured, l.P50MS, l.P99MS, l.MeanMS, l.MeanMS > 0})
		}
	}
	if b := r.Broker; b != nil {
		rows = append(rows, row{name: "broker: produce (gateway send code)", ops: int64(b.Messages), conc: b.Producers, elapsed: b.ProduceS, perS: b.ProducePS},
			row{name: "broker: consume the backlog", ops: int64(b.Messages), conc: b.ConsumerConcurrency, elapsed: b.ConsumeS, perS: b.ConsumePS})
	}
	if s := r.Sagas; s != nil {
		rows = append(rows, row{name: "(c) sagas: start (starter code)", ops: int64(s.Sagas), conc: s.Starters, elapsed: s.StartS, perS: s.StartsPS},
			row{name: "(c) sagas: drain (created+projected)", ops: int64(s.Sagas), conc: s.Starters, elapsed: s.DrainS, perS: s.SagasPS})
	}
	if s := r.Plain; s != nil && s.DrainS > 0 {
		rows = append(rows, row{name: "(d) plain workflows: start", ops: int64(s.Sagas), conc: s.Starters, elapsed: s.StartS, perS: s.StartsPS},
			row{name: "(d) plain workflows: drain", ops: int64(s.Sagas), conc: s.Starters, elapsed: s.DrainS, perS: s.SagasPS})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "leg\tops\tconc\telapsed s\tops/s\tp50 ms\tp99 ms\tmean ms\t")
	for _, x := range rows {
		p50, p99, mean := "n/a", "n/a", "n/a"
		if x.lat {
			p50, p99 = fmt.Sprintf("%.2f", x.p50), fmt.Sprintf("%.2f", x.p99)
		}
		if x.meanKnown {
			mean = fmt.Sprintf("%.2f", x.mean)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.0f\t%s\t%s\t%s\t\n", x.name, x.ops, x.conc, x.elapsed, x.perS, p50, p99, mean)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

// writeOutcomes prints what each leg did.
func (r *OrderReport) writeOutcomes(w io.Writer) {
	for _, l := range []*OrderLeg{r.PGBench, r.CreateOrder} {
		if l != nil {
			fmt.Fprintf(w, "  %s: %s\n", l.Name, l.Outcome)
		}
	}
	if b := r.Broker; b != nil {
		fmt.Fprintf(w, "  broker: %s\n", b.Outcome)
	}
	if s := r.Sagas; s != nil {
		fmt.Fprintf(w, "  (c) sagas: %s\n", s.Outcome)
	}
	if s := r.Plain; s != nil {
		fmt.Fprintf(w, "  (d) plain workflows: %s\n", s.Outcome)
	}
	fmt.Fprintln(w)

}

// cpuRow is one leg's CPU under the leg's name.
type cpuRow struct {
	name string
	c    LegCPU
}

// cpuLegs is the CPU of every leg that ran.
func (r *OrderReport) cpuLegs() []cpuRow {
	var cpus []cpuRow
	for _, l := range []*OrderLeg{r.PGBench, r.CreateOrder} {
		if l != nil {
			cpus = append(cpus, cpuRow{l.Name, l.CPU})
		}
	}
	if b := r.Broker; b != nil {
		cpus = append(cpus, cpuRow{"broker: produce", b.Produce}, cpuRow{"broker: consume", b.Consume})
	}
	if s := r.Sagas; s != nil {
		cpus = append(cpus, cpuRow{"(c) sagas (start + drain)", s.CPU})
	}
	if s := r.Plain; s != nil && s.DrainS > 0 {
		cpus = append(cpus, cpuRow{"(d) plain workflows (start + drain)", s.CPU})
	}
	return cpus
}

// writeCPU prints the CPU each leg used and what the backends waited for.
func (r *OrderReport) writeCPU(w io.Writer) {
	fmt.Fprintln(w, "CPU during each leg: machine busy (% of all CPUs), machine CPU per op (µs of one core), off-path")
	fmt.Fprintln(w, "(share of the machine used by processes not on the leg's path: other people's work, the kernel):")
	cpus := r.cpuLegs()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "leg\tmachine busy\tµs/op\toff-path\t")
	for _, x := range cpus {
		fmt.Fprintf(tw, "%s\t%.0f%%\t%.0f\t%.0f%%\t\n", x.name, x.c.MachineBusyPct, x.c.MachineUS, x.c.OffPathPct)
	}
	_ = tw.Flush()
	for _, x := range cpus {
		parts := make([]string, 0, len(x.c.TopProcesses))
		for _, p := range x.c.TopProcesses {
			parts = append(parts, fmt.Sprintf("%s %.0f", p.Name, p.US))
		}
		fmt.Fprintf(w, "  %s: top processes (µs/op): %s\n", x.name, strings.Join(parts, ", "))
	}
	for _, l := range []*OrderLeg{r.PGBench, r.CreateOrder} {
		if l == nil || len(l.Waits) == 0 {
			continue
		}
		parts := make([]string, 0, len(l.Waits))
		for _, x := range l.Waits {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", x.State, x.Pct))
		}
		fmt.Fprintf(w, "  %s: PostgreSQL backends sampled: %s\n", l.Name, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)

}

// writeRatios prints the ratios against their targets, the notes and the
// failures.
func (r *OrderReport) writeRatios(w io.Writer) {
	writeRatioTable(w, r.Ratios)
	if s := r.Sagas; s != nil && s.DrainS > 0 {
		fmt.Fprintf(w, "sagas/s end to end from a backlog of %d reservations: %.1f (steady 10%%-90%%: %.1f); drain time %.1f s\n",
			s.Sagas, s.SagasPS, s.SteadyPS, s.DrainS)
	}
	if s := r.Plain; s != nil && s.DrainS > 0 {
		fmt.Fprintf(w, "plain workflows/s from a backlog of %d: %.1f (steady 10%%-90%%: %.1f); drain time %.1f s\n",
			s.Sagas, s.SagasPS, s.SteadyPS, s.DrainS)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "FAILED:")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
}

// WaitShare is the share of sampled backend states in one category.
type WaitShare struct {
	State string  `json:"state"`
	Pct   float64 `json:"pct"`
}

// WaitState names what one PostgreSQL client backend was doing, from
// pg_stat_activity's state, wait_event_type and wait_event.
func WaitState(state, waitType, waitEvent string) string {
	switch {
	case state == "idle":
		return "idle (between transactions)"
	case state == "idle in transaction":
		return "in transaction, waiting for the client"
	case state != "active":
		return state
	case waitType == "":
		return "running (CPU)"
	case waitType == "Lock":
		return "Lock:" + waitEvent + " (row lock of another transaction)"
	}
	return waitType + ":" + waitEvent
}

// WaitShares turns counts of sampled states into shares, largest first.
func WaitShares(counts map[string]int) []WaitShare {
	var total int
	for _, n := range counts {
		total += n
	}
	out := make([]WaitShare, 0, len(counts))
	for st, n := range counts {
		if n > 0 {
			out = append(out, WaitShare{State: st, Pct: 100 * float64(n) / float64(total)})
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].Pct > out[j-1].Pct || out[j].Pct == out[j-1].Pct && out[j].State < out[j-1].State); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Milestones returns, for progress samples (seconds since the start, done
// count; in time order), the first time at which each fraction of total was
// reached, keyed "10%", "50%", "90%", "100%", and the rate between 10% and
// 90% (0 when not measurable).
func Milestones(at []float64, done []int64, total int64) (map[string]float64, float64) {
	out := map[string]float64{}
	if total <= 0 || len(at) != len(done) {
		return out, 0
	}
	fr := []struct {
		key string
		f   float64
	}{{"10%", 0.1}, {"50%", 0.5}, {"90%", 0.9}, {"100%", 1}}
	for _, x := range fr {
		want := int64(x.f * float64(total))
		for i := range at {
			if done[i] >= want {
				out[x.key] = at[i]
				break
			}
		}
	}
	t10, ok10 := out["10%"]
	t90, ok90 := out["90%"]
	if !ok10 || !ok90 || t90 <= t10 {
		return out, 0
	}
	return out, 0.8 * float64(total) / (t90 - t10)
}
