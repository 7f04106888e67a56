package bench

// The cases of `seckill-dev bench reserve` in their order, the fixed-rate case
// and the ratios against the targets.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Names of the cases the ratios and `bench all` read.
const (
	caseRawInStock  = "raw EVALSHA in-stock"
	caseRawSoldOut  = "raw EVALSHA sold-out"
	caseHTTPInStock = "HTTP in-stock"
	caseHTTPSoldOut = "HTTP sold-out"
	caseNoLimits    = "HTTP sold-out (no limits)"
	caseFixedRate   = "HTTP in-stock @ half peak"
	// FixedRateP99TargetMS is the fixed-rate case's latency target: p99
	// below 5 ms at half the peak in-stock rate.
	FixedRateP99TargetMS = 5.0
)

// genSuffix names the load generator in the names of the second one's
// cases ("" for the main one).
func (e *benchEnv) genSuffix(i int) string {
	if i == 0 {
		return ""
	}
	return " [" + e.gens[i] + "]"
}

func (e *benchEnv) runPhases(ctx context.Context) error {
	if err := e.raw(ctx, "in-stock", benchSKURaw); err != nil {
		return err
	}
	if err := e.raw(ctx, "sold-out", benchSKUSoldOut); err != nil {
		return err
	}
	for i, gen := range e.gens {
		sku, suffix := benchSKUHTTP, e.genSuffix(i)
		if i > 0 {
			sku = benchSKUHTTPGo
		}
		for _, hc := range []*httpCase{
			newHTTPCase(e.gw, "in-stock", sku, gen, suffix, e.o.Requests),
			newHTTPCase(e.gw, "sold-out", benchSKUSoldOut, gen, suffix, e.o.Requests),
			newHTTPCase(e.gwOff, "sold-out", benchSKUSoldOut, gen, suffix, e.o.Requests),
		} {
			if err := e.http(ctx, hc); err != nil {
				return err
			}
		}
	}
	if e.o.FixedRateDuration > 0 {
		return e.fixedRate(ctx)
	}
	return nil
}

// fixedRate runs the in-stock case once more on a SKU of its own, paced by
// the main load generator at half the peak in-stock rate just measured, for
// --fixed-rate-duration: its latency is the figure (p99 < 5 ms).
func (e *benchEnv) fixedRate(ctx context.Context) error {
	peak := e.report.Case(caseHTTPInStock)
	if peak == nil || peak.ReservationsPS <= 0 {
		return errors.New("fixed-rate case: no peak in-stock rate measured")
	}
	rate := peak.ReservationsPS / 2
	n := int(rate * e.o.FixedRateDuration.Seconds())
	n = max(min(1000, e.o.Requests), min(n, e.o.Requests))
	hc := newHTTPCase(e.gw, "in-stock", benchSKUFixed, e.gens[0], " @ half peak", n)
	hc.rate = rate
	return e.http(ctx, hc)
}

// ratios adds the HTTP/raw throughput ratios and their targets.
func (e *benchEnv) ratios() {
	r := e.report
	ri, rs := r.Case(caseRawInStock), r.Case(caseRawSoldOut)
	for i := range e.gens {
		suffix := e.genSuffix(i)
		hi, hs := r.Case(caseHTTPInStock+suffix), r.Case(caseHTTPSoldOut+suffix)
		if ri != nil && hi != nil {
			r.Ratios = append(r.Ratios, NewRatio("HTTP in-stock"+suffix+" / raw EVALSHA in-stock (reservations/s)",
				hi.ReservationsPS, ri.ReservationsPS, ">=", 0.60))
		}
		if rs != nil && hs != nil {
			r.Ratios = append(r.Ratios, NewRatio("HTTP sold-out"+suffix+" / raw EVALSHA sold-out (requests/s)",
				hs.RPS, rs.RPS, ">", 1.0))
		}
		if off := r.Case(caseNoLimits + suffix); hs != nil && off != nil && off.RPS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the rate limits' cost on the cheapest path%s: HTTP sold-out with limits / without = %.2f (requests/s), p50 %.3f vs %.3f ms",
				suffix, hs.RPS/off.RPS, hs.P50MS, off.P50MS))
		}
		if hi != nil && hi.GatewayUS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the gateway's own CPU per in-stock reservation (wrk drives it from its own process): %.1f µs; wrk %.1f µs",
				hi.GatewayUS, hi.CPU.ChildUS))
		}
	}
	if f := r.Case(caseFixedRate); f != nil {
		r.Ratios = append(r.Ratios, Ratio{Name: fmt.Sprintf("HTTP in-stock p99 at half peak, %.0f/s paced by %s (ms)", f.TargetRPS, pacedBy(f.Loadgen)),
			Value: f.P99MS, Op: "<", Target: FixedRateP99TargetMS, Met: f.P99MS > 0 && f.P99MS < FixedRateP99TargetMS})
	}
	e.noteOthers(ri, rs)
}

// noteOthers adds the reference figures and the noise warnings.
func (e *benchEnv) noteOthers(ri, rs *Case) {
	r := e.report
	hs := r.Case(caseHTTPSoldOut)
	if rs != nil && hs != nil {
		if ri != nil && ri.RPS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("for reference, HTTP sold-out / raw EVALSHA in-stock (requests/s) = %.2f", hs.RPS/ri.RPS))
		}
		if hs.P50MS > 0 && rs.P50MS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("sold-out p50: HTTP %.3f ms vs raw EVALSHA %.3f ms (%s)",
				hs.P50MS, rs.P50MS, map[bool]string{true: "HTTP faster", false: "raw faster"}[hs.P50MS < rs.P50MS]))
		}
	}
	if len(e.gens) > 1 {
		a, b := r.Case(caseHTTPInStock), r.Case(caseHTTPInStock+e.genSuffix(1))
		if a != nil && b != nil && a.ReservationsPS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("HTTP in-stock driven by %s / by %s = %.2f (reservations/s): what the load generator's place costs",
				e.gens[1], e.gens[0], b.ReservationsPS/a.ReservationsPS))
		}
	}
	for _, c := range r.Cases {
		if c.OtherWorkPct >= 10 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: off-path work used %.0f%% of the machine during the case; its figures are understated",
				c.Name, c.OtherWorkPct))
		}
	}
}

// pacedBy says how a fixed-rate case was paced.
func pacedBy(gen string) string {
	if gen == loadGenWrk {
		return "wrk's Lua delay() on a per-thread schedule"
	}
	return "the Go load generator's open-loop schedule"
}

// wrkVersion is wrk's version line (wrk --version prints it and exits 1).
func wrkVersion(ctx context.Context, path string) string {
	vctx, c := context.WithTimeout(ctx, 5*time.Second)
	defer c()
	out, _ := exec.CommandContext(vctx, path, "--version").Output() // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if line == "" {
		return "wrk (version unknown)"
	}
	return strings.TrimSpace(line)
}
