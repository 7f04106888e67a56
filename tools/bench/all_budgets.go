package bench

import "fmt"

// The CPU budgets of `bench all`: CPU per operation divided by the CPU per
// operation of a baseline measured in the same run, which holds from
// machine to machine where absolute figures do not (docs/benchmarks.md).
const (
	// BudgetGatewayAdmit: gateway CPU per admitted reservation ÷
	// redis-server CPU per raw EVALSHA of reserve.lua.
	BudgetGatewayAdmit = 1.0
	// BudgetGatewaySoldOut: gateway CPU per sold-out answer ÷ redis-server
	// CPU per raw sold-out EVALSHA.
	BudgetGatewaySoldOut = 1.25
	// BudgetBrokerAdmit: broker CPU per admitted reservation ÷ redis-server
	// CPU per raw EVALSHA.
	BudgetBrokerAdmit = 0.4
	// BudgetMachineAdmit: the whole machine per HTTP admission ÷ the whole
	// machine per raw EVALSHA.
	BudgetMachineAdmit = 2.0
	// BudgetSagaPerOrder: the machine per saga (backlog drain) ÷ the
	// machine per CreateOrder transaction (b).
	BudgetSagaPerOrder = 6.0
	// BudgetTemporalSaga: the Temporal server's CPU per saga ÷ per plain
	// workflow of the same shape (d).
	BudgetTemporalSaga = 0.25
)

// budgetRows are the CPU budget rows, each only when both of its figures
// were measured (a process missing from a leg's top processes, or a leg
// skipped, leaves its row out rather than meeting a budget by a zero).
func budgetRows(r *Report, o *OrderReport) []AllRow {
	var rows []AllRow
	add := func(leg string, project float64, baseName string, base, budget float64, offPath ...float64) {
		if project > 0 && base > 0 {
			rows = append(rows, noisy(ratioRow("CPU budget: "+leg, "µs", project, baseName, base, "<=", budget), offPath...))
		}
	}
	if r != nil {
		ri, rs := r.Case(caseRawInStock), r.Case(caseRawSoldOut)
		if hi := r.Case(caseHTTPInStock); hi != nil && ri != nil {
			add("gateway per admitted reservation (µs)", hi.GatewayUS, "redis-server per raw EVALSHA",
				ri.CPU.RedisUS, BudgetGatewayAdmit, hi.OtherWorkPct, ri.OtherWorkPct)
			add("broker per admitted reservation (µs)", procUS(hi.TopProcesses, "rocketmq-broker"), "redis-server per raw EVALSHA",
				ri.CPU.RedisUS, BudgetBrokerAdmit, hi.OtherWorkPct, ri.OtherWorkPct)
			add("machine per HTTP admission (µs)", hi.CPU.MachineUS, "machine per raw EVALSHA",
				ri.CPU.MachineUS, BudgetMachineAdmit, hi.OtherWorkPct, ri.OtherWorkPct)
		}
		if hs := r.Case(caseHTTPSoldOut); hs != nil && rs != nil {
			add("gateway per sold-out answer (µs)", hs.GatewayUS, "redis-server per raw sold-out EVALSHA",
				rs.CPU.RedisUS, BudgetGatewaySoldOut, hs.OtherWorkPct, rs.OtherWorkPct)
		}
	}
	if o == nil || o.Sagas == nil {
		return rows
	}
	s := o.Sagas
	if b := o.CreateOrder; b != nil {
		add(fmt.Sprintf("machine per saga, backlog of %d (µs)", s.Sagas), s.CPU.MachineUS, "machine per CreateOrder (b)",
			b.CPU.MachineUS, BudgetSagaPerOrder, s.CPU.OffPathPct, b.CPU.OffPathPct)
	}
	if p := o.Plain; p != nil {
		add("Temporal server per saga (µs)", temporalUS(s.CPU.TopProcesses), "per plain workflow (d)",
			temporalUS(p.CPU.TopProcesses), BudgetTemporalSaga, s.CPU.OffPathPct, p.CPU.OffPathPct)
	}
	return rows
}

// procUS is the CPU per operation of the process named name among top (0:
// not among them).
func procUS(top []ProcCost, name string) float64 {
	for _, p := range top {
		if p.Name == name {
			return p.US
		}
	}
	return 0
}

// temporalUS is the Temporal server's: the dev server ("temporal") or the
// real one ("temporal-server", SECKILL_TEMPORAL=server).
func temporalUS(top []ProcCost) float64 {
	return procUS(top, "temporal") + procUS(top, "temporal-server")
}

// shapeRows are counts per operation, for reference (no target): Redis
// commands per admission against the raw call's, and what a saga's forward
// path leaves in Temporal.
func shapeRows(r *Report, o *OrderReport) []AllRow {
	var rows []AllRow
	if r != nil {
		if hi, ri := r.Case(caseHTTPInStock), r.Case(caseRawInStock); hi != nil && ri != nil && hi.RedisCommands > 0 && ri.RedisCommands > 0 {
			rows = append(rows, noisy(AllRow{Leg: "Redis commands per admitted reservation (HTTP)", Project: hi.RedisCommands,
				BaselineName: "per raw EVALSHA", Baseline: ri.RedisCommands, Ratio: hi.RedisCommands / ri.RedisCommands,
				Note: "INFO total_commands_processed: a script call and each command it runs count, and every client's commands during the case (the workers' polling too)"},
				hi.OtherWorkPct, ri.OtherWorkPct))
		}
	}
	if o != nil && o.Sagas != nil && o.Sagas.History != nil && o.Sagas.History.Sampled > 0 {
		h := o.Sagas.History
		note := fmt.Sprintf("forward path (started, order created, waiting for payment), %d sagas sampled", h.Sampled)
		rows = append(rows,
			AllRow{Leg: "saga requests to the Temporal frontend", Project: o.Sagas.Requests,
				Note: "the bench process's client during the drain: starts, long polls, task completions, reads"},
			AllRow{Leg: "saga history events", Project: h.Events, Note: note},
			AllRow{Leg: "saga workflow tasks", Project: h.WorkflowTasks,
				Note: fmt.Sprintf("%.1f activities, %.1f markers (local activities) and %.1f search attribute upserts per saga", h.Activities, h.Markers, h.Upserts)})
	}
	return rows
}
