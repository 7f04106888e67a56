package bench

// The table of `seckill-dev bench all`: one row per figure, read from the
// reserve and order reports of the same run.

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// AllRow is one figure of `bench all`: the project's, the baseline measured
// in the same run, their ratio and the target.
type AllRow struct {
	Leg          string  `json:"leg"`
	Unit         string  `json:"unit"`
	Project      float64 `json:"project"`
	BaselineName string  `json:"baseline_name,omitempty"`
	Baseline     float64 `json:"baseline,omitempty"`
	// Ratio is Project / Baseline (0: no baseline).
	Ratio float64 `json:"ratio,omitempty"`
	// Target is what must hold, on the ratio if there is a baseline, else
	// on the figure: e.g. ">= 0.60", "< 5".
	Target string `json:"target,omitempty"`
	// TargetOnRatio: the target is on Ratio, else on Project.
	TargetOnRatio bool  `json:"target_on_ratio,omitempty"`
	Met           *bool `json:"met,omitempty"` // nil: no target (for reference)
	// OffPathPct is the largest share of the machine that work off the
	// measured path used during the legs behind the row (noise).
	OffPathPct float64 `json:"off_path_pct"`
	// Busy: measured on a machine found busy before a leg (--force), or
	// with more than the allowed off-path work during it.
	Busy bool   `json:"busy"`
	Note string `json:"note,omitempty"`
}

// AllRows builds the table from the two reports (either may be nil: a
// bench that failed to start). Every row is flagged busy with busy, else
// those whose legs had more than maxBusy% off-path work.
func AllRows(r *Report, o *OrderReport, busy bool, maxBusy float64) []AllRow {
	var rows []AllRow
	if r != nil {
		rows = append(rows, reserveRows(r)...)
	}
	if o != nil {
		rows = append(rows, orderRows(o)...)
	}
	rows = append(append(rows, budgetRows(r, o)...), shapeRows(r, o)...)
	for i := range rows {
		rows[i].Busy = busy || rows[i].OffPathPct > maxBusy
	}
	return rows
}

// noisy records the off-path work of the legs behind a row.
func noisy(row AllRow, pcts ...float64) AllRow {
	for _, p := range pcts {
		row.OffPathPct = max(row.OffPathPct, p)
	}
	return row
}

func met(v bool) *bool { return &v }

// ratioRow is a row whose target is on Project / Baseline.
func ratioRow(leg, unit string, project float64, baseName string, base float64, op string, target float64) AllRow {
	q := NewRatio(leg, project, base, op, target)
	row := AllRow{Leg: leg, Unit: unit, Project: project, BaselineName: baseName, Baseline: base, Ratio: q.Value}
	if op != "" {
		row.Target, row.TargetOnRatio, row.Met = fmt.Sprintf("%s %.2f", op, target), true, met(q.Met)
	}
	return row
}

func reserveRows(r *Report) []AllRow {
	var rows []AllRow
	ri, rs := r.Case(caseRawInStock), r.Case(caseRawSoldOut)
	if hi := r.Case(caseHTTPInStock); hi != nil && ri != nil {
		rows = append(rows, noisy(ratioRow("HTTP in-stock, wrk (reservations/s)", "/s", hi.ReservationsPS,
			"raw EVALSHA in-stock", ri.ReservationsPS, ">=", 0.60), hi.OtherWorkPct, ri.OtherWorkPct))
		if hi.GatewayUS > 0 {
			rows = append(rows, noisy(AllRow{Leg: "gateway CPU per reservation, driven by wrk (µs)", Unit: "µs", Project: hi.GatewayUS,
				BaselineName: "raw EVALSHA in-stock, whole machine", Baseline: ri.CPU.MachineUS, Ratio: hi.GatewayUS / ri.CPU.MachineUS},
				hi.OtherWorkPct, ri.OtherWorkPct))
		}
	}
	if hs := r.Case(caseHTTPSoldOut); hs != nil && rs != nil {
		rows = append(rows, noisy(ratioRow("HTTP sold-out, wrk (requests/s)", "/s", hs.RPS, "raw EVALSHA sold-out", rs.RPS, ">", 1.0),
			hs.OtherWorkPct, rs.OtherWorkPct))
		if off := r.Case(caseNoLimits); off != nil {
			rows = append(rows, noisy(ratioRow("HTTP sold-out with rate limits, wrk (requests/s)", "/s", hs.RPS, "the same without limits", off.RPS, "", 0),
				hs.OtherWorkPct, off.OtherWorkPct))
		}
	}
	if f := r.Case(caseFixedRate); f != nil {
		row := AllRow{Leg: fmt.Sprintf("HTTP in-stock p99 at half peak (%.0f/s, %s; ms)", f.TargetRPS, f.Loadgen), Unit: "ms", Project: f.P99MS,
			Target: fmt.Sprintf("< %.0f", FixedRateP99TargetMS), Met: met(f.P99MS > 0 && f.P99MS < FixedRateP99TargetMS),
			Note: fmt.Sprintf("p50 %.2f ms, p90 %.2f ms; paced by %s", f.P50MS, f.P90MS, pacedByWrk)}
		if ri != nil {
			row.BaselineName, row.Baseline = "raw EVALSHA in-stock p99 (closed loop)", ri.P99MS
			row.Ratio = f.P99MS / ri.P99MS
		}
		rows = append(rows, noisy(row, f.OtherWorkPct))
	}
	return rows
}

func orderRows(o *OrderReport) []AllRow {
	var rows []AllRow
	if o.CreateOrder != nil && o.PGBench != nil {
		rows = append(rows, noisy(ratioRow("(b) CreateOrder (tx/s)", "/s", o.CreateOrder.PerS, "(a) pgbench, 4 statements", o.PGBench.PerS, ">=", CreateOrderTarget),
			o.CreateOrder.CPU.OffPathPct, o.PGBench.CPU.OffPathPct))
	}
	if b := o.Broker; b != nil && b.ConsumeS > 0 {
		rows = append(rows, noisy(AllRow{Leg: "broker: consume the backlog (msg/s)", Unit: "/s", Project: b.ConsumePS,
			BaselineName: "broker: produce", Baseline: b.ProducePS, Ratio: b.ConsumePS / max(b.ProducePS, 1e-9)},
			b.Consume.OffPathPct, b.Produce.OffPathPct))
	}
	s := o.Sagas
	if s == nil || s.DrainS <= 0 {
		return rows
	}
	p := o.Plain
	if p != nil && p.DrainS > 0 {
		rows = append(rows, noisy(ratioRow(fmt.Sprintf("(c) sagas/s, backlog of %d", s.Sagas), "/s", s.SagasPS,
			"(d) plain workflows/s", p.SagasPS, ">=", SagaPlainTarget), s.CPU.OffPathPct, p.CPU.OffPathPct))
	} else {
		rows = append(rows, noisy(AllRow{Leg: fmt.Sprintf("(c) sagas/s, backlog of %d", s.Sagas), Unit: "/s", Project: s.SagasPS,
			Target: fmt.Sprintf(">= %.2f", SagaPlainTarget), Note: "no plain workflow leg: ratio not measured"}, s.CPU.OffPathPct))
	}
	drain := AllRow{Leg: fmt.Sprintf("(c) drain time of a %d backlog (s)", DrainBacklog), Unit: "s", Project: s.DrainS,
		Target: fmt.Sprintf("<= %.0f", DrainTargetS)}
	if s.Sagas != DrainBacklog {
		drain.Project = DrainBacklog / s.SagasPS
		drain.Note = fmt.Sprintf("extrapolated from %d sagas at %.1f/s", s.Sagas, s.SagasPS)
	}
	if p != nil && p.SagasPS > 0 {
		drain.BaselineName, drain.Baseline = "(d) plain, extrapolated", DrainBacklog/p.SagasPS
		drain.Ratio = drain.Project / drain.Baseline
	}
	drain.Met = met(drain.Project <= DrainTargetS)
	drain = noisy(drain, s.CPU.OffPathPct)
	if p != nil {
		drain = noisy(drain, p.CPU.OffPathPct)
	}
	return append(rows, drain)
}

// WriteText prints the table, the checks of the machine and the failures
// (with details, both full reports after them).
func (r *AllReport) WriteText(w io.Writer, details bool) {
	fmt.Fprintf(w, "%s\n", r.Command)
	fmt.Fprintf(w, "started %s, took %.0f s; commit %s; %d CPUs\n", r.Started.Format("2006-01-02 15:04:05 MST"), r.TookS, r.Commit, r.CPUs)
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  before the %s: machine %.0f%% busy, %.0f%% besides the bench (%s)%s\n", c.Before, c.MachinePct, c.OtherPct,
			strings.Join(c.Top, ", "), map[bool]string{true: " BUSY"}[c.Busy])
	}
	if r.Busy {
		fmt.Fprintf(w, "BUSY: the machine had more than %.0f%% other work before a leg (--force): every figure is flagged\n", r.MaxBusy)
	}
	fmt.Fprintf(w, "(busy) marks figures measured with more than %.0f%% of the machine used by work off the measured path\n\n", r.MaxBusy)
	WriteAllTable(w, r.Rows)
	if len(r.Failures) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "FAILED:")
		for _, f := range r.Failures {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	}
	if details {
		if r.Reserve != nil {
			fmt.Fprintln(w)
			r.Reserve.WriteText(w)
		}
		if r.Order != nil {
			fmt.Fprintln(w)
			r.Order.WriteText(w)
		}
	}
}

// WriteAllTable prints the rows: leg, this project, baseline in the same
// run, ratio, target, met.
func WriteAllTable(w io.Writer, rows []AllRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "leg\tthis project\tbaseline (same run)\tratio\ttarget\tmet")
	var notes []string
	for _, x := range rows {
		base, ratio := "–", "–"
		if x.BaselineName != "" {
			base = fmt.Sprintf("%s %s", num(x.Baseline), x.BaselineName)
			if x.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", x.Ratio)
			}
		}
		target, verdict := "–", "–"
		if x.Target != "" {
			target = x.Target
			if x.TargetOnRatio {
				target = "ratio " + x.Target
			}
		}
		if x.Met != nil {
			verdict = map[bool]string{true: "yes", false: "NO"}[*x.Met]
		}
		if x.Busy {
			verdict += " (busy)"
		}
		leg := x.Leg
		if x.Note != "" {
			notes = append(notes, fmt.Sprintf("[%d] %s: %s", len(notes)+1, x.Leg, x.Note))
			leg += fmt.Sprintf(" [%d]", len(notes))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", leg, num(x.Project), base, ratio, target, verdict)
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintf(w, "%s\n", n)
	}
}

// num prints a figure with a precision that suits its size.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
