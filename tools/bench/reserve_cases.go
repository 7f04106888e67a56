package bench

// The cases of `seckill-dev bench reserve` in their order, the fixed-rate case
// and the ratios against the targets.

import (
	"context"
	"errors"
	"fmt"
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

func (e *benchEnv) runPhases(ctx context.Context) error {
	if err := e.raw(ctx, "in-stock", benchSKURaw); err != nil {
		return err
	}
	if err := e.raw(ctx, "sold-out", benchSKUSoldOut); err != nil {
		return err
	}
	for _, hc := range []*httpCase{
		newHTTPCase(e.gw, "in-stock", benchSKUHTTP, "", e.o.Requests),
		newHTTPCase(e.gw, "sold-out", benchSKUSoldOut, "", e.o.Requests),
		newHTTPCase(e.gwOff, "sold-out", benchSKUSoldOut, "", e.o.Requests),
	} {
		if err := e.http(ctx, hc); err != nil {
			return err
		}
	}
	if e.o.FixedRateDuration > 0 {
		return e.fixedRate(ctx)
	}
	return nil
}

// fixedRate runs the in-stock case once more on a SKU of its own, paced by
// wrk at half the peak in-stock rate just measured, for
// --fixed-rate-duration: its latency is the figure (p99 < 5 ms).
func (e *benchEnv) fixedRate(ctx context.Context) error {
	peak := e.report.Case(caseHTTPInStock)
	if peak == nil || peak.ReservationsPS <= 0 {
		return errors.New("fixed-rate case: no peak in-stock rate measured")
	}
	rate := peak.ReservationsPS / 2
	n := int(rate * e.o.FixedRateDuration.Seconds())
	n = max(min(1000, e.o.Requests), min(n, e.o.Requests))
	hc := newHTTPCase(e.gw, "in-stock", benchSKUFixed, " @ half peak", n)
	hc.rate = rate
	return e.http(ctx, hc)
}

// ratios adds the HTTP/raw throughput ratios and their targets.
func (e *benchEnv) ratios() {
	r := e.report
	ri, rs := r.Case(caseRawInStock), r.Case(caseRawSoldOut)
	hi, hs := r.Case(caseHTTPInStock), r.Case(caseHTTPSoldOut)
	if ri != nil && hi != nil {
		r.Ratios = append(r.Ratios, NewRatio("HTTP in-stock / raw EVALSHA in-stock (reservations/s)",
			hi.ReservationsPS, ri.ReservationsPS, ">=", 0.60))
	}
	if rs != nil && hs != nil {
		r.Ratios = append(r.Ratios, NewRatio("HTTP sold-out / raw EVALSHA sold-out (requests/s)",
			hs.RPS, rs.RPS, ">", 1.0))
	}
	if off := r.Case(caseNoLimits); hs != nil && off != nil && off.RPS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the rate limits' cost on the cheapest path: HTTP sold-out with limits / without = %.2f (requests/s), p50 %.3f vs %.3f ms",
			hs.RPS/off.RPS, hs.P50MS, off.P50MS))
	}
	if hi != nil && hi.GatewayUS > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the gateway's own CPU per in-stock reservation (wrk drives it from its own process): %.1f µs; wrk %.1f µs",
			hi.GatewayUS, hi.CPU.ChildUS))
	}
	if f := r.Case(caseFixedRate); f != nil {
		r.Ratios = append(r.Ratios, Ratio{Name: fmt.Sprintf("HTTP in-stock p99 at half peak, %.0f/s paced by %s (ms)", f.TargetRPS, pacedByWrk),
			Value: f.P99MS, Op: "<", Target: FixedRateP99TargetMS, Met: f.P99MS > 0 && f.P99MS < FixedRateP99TargetMS})
	}
	e.noteOthers(ri, rs, hs)
}

// noteOthers adds the reference figures and the noise warnings.
func (e *benchEnv) noteOthers(ri, rs, hs *Case) {
	r := e.report
	if rs != nil && hs != nil {
		if ri != nil && ri.RPS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("for reference, HTTP sold-out / raw EVALSHA in-stock (requests/s) = %.2f", hs.RPS/ri.RPS))
		}
		if hs.P50MS > 0 && rs.P50MS > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("sold-out p50: HTTP %.3f ms vs raw EVALSHA %.3f ms (%s)",
				hs.P50MS, rs.P50MS, map[bool]string{true: "HTTP faster", false: "raw faster"}[hs.P50MS < rs.P50MS]))
		}
	}
	for _, c := range r.Cases {
		if c.OtherWorkPct >= 10 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s: off-path work used %.0f%% of the machine during the case; its figures are understated",
				c.Name, c.OtherWorkPct))
		}
	}
}

// pacedByWrk says how the fixed-rate case is paced.
const pacedByWrk = "wrk's Lua delay() on a per-thread schedule"
