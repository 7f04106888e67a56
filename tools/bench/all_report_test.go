package bench

import (
	"bytes"
	"strings"
	"testing"
)

func sampleReports() (*Report, *OrderReport) {
	r := &Report{Cases: []Case{
		{Name: caseRawInStock, ReservationsPS: 20000, RPS: 20000, P99MS: 4, CPU: CPUCost{MachineUS: 80}},
		{Name: caseRawSoldOut, RPS: 50000},
		{Name: caseHTTPInStock, Loadgen: "wrk", ReservationsPS: 13000, GatewayUS: 120},
		{Name: caseHTTPSoldOut, Loadgen: "wrk", RPS: 55000},
		{Name: caseNoLimits, Loadgen: "wrk", RPS: 60000},
		{Name: caseFixedRate, Loadgen: "wrk", TargetRPS: 6500, P50MS: 1.1, P90MS: 2, P99MS: 6.5},
	}}
	o := &OrderReport{
		PGBench:     &OrderLeg{PerS: 1500},
		CreateOrder: &OrderLeg{PerS: 1350},
		Sagas:       &SagaLeg{Sagas: 2000, DrainS: 20, SagasPS: 100},
		Plain:       &SagaLeg{Sagas: 2000, DrainS: 50, SagasPS: 40},
	}
	return r, o
}

func rowNamed(t *testing.T, rows []AllRow, prefix string) AllRow {
	t.Helper()
	for _, r := range rows {
		if strings.HasPrefix(r.Leg, prefix) {
			return r
		}
	}
	t.Fatalf("no row %q in %+v", prefix, rows)
	return AllRow{}
}

func TestAllRows(t *testing.T) {
	r, o := sampleReports()
	rows := AllRows(r, o, false, 25)
	for _, tc := range []struct {
		leg   string
		ratio float64
		met   bool
	}{
		{"HTTP in-stock, wrk", 0.65, true},
		{"HTTP sold-out, wrk", 1.10, true},
		{"(b) CreateOrder", 0.90, false}, // target 1.00
		{"(c) sagas/s", 2.5, true},
	} {
		row := rowNamed(t, rows, tc.leg)
		if row.Ratio < tc.ratio-1e-9 || row.Ratio > tc.ratio+1e-9 || row.Met == nil || *row.Met != tc.met || !row.TargetOnRatio {
			t.Errorf("%s: ratio %.3f met %v, want %.2f %v (%+v)", tc.leg, row.Ratio, row.Met, tc.ratio, tc.met, row)
		}
	}
	f := rowNamed(t, rows, "HTTP in-stock p99 at half peak")
	if f.Project != 6.5 || f.Met == nil || *f.Met || f.Target != "< 5" || f.TargetOnRatio {
		t.Errorf("fixed rate row %+v", f)
	}
	d := rowNamed(t, rows, "(c) drain time")
	// 10,000 at 100/s: 100 s (met), extrapolated; the plain baseline 250 s.
	if d.Project != 100 || d.Met == nil || !*d.Met || !strings.Contains(d.Note, "extrapolated from 2000") || d.Baseline != 250 {
		t.Errorf("drain row %+v", d)
	}
	if g := rowNamed(t, rows, "gateway CPU"); g.Project != 120 || g.Met != nil {
		t.Errorf("gateway row %+v", g)
	}
	for _, row := range rows {
		if row.Busy {
			t.Fatalf("row flagged busy: %+v", row)
		}
	}
	// Off-path work above the limit during a leg flags the rows it feeds.
	r.Cases[1].OtherWorkPct = 30 // raw EVALSHA sold-out
	for _, row := range AllRows(r, o, false, 25) {
		if want := strings.HasPrefix(row.Leg, "HTTP sold-out,"); row.Busy != want {
			t.Errorf("%s: busy %v, want %v", row.Leg, row.Busy, want)
		}
	}
}

func TestAllRowsDrainMeasuredAndMissed(t *testing.T) {
	_, o := sampleReports()
	o.Sagas = &SagaLeg{Sagas: DrainBacklog, DrainS: 283, SagasPS: 35.3}
	o.Plain = nil
	rows := AllRows(nil, o, true, 25)
	d := rowNamed(t, rows, "(c) drain time")
	if d.Project != 283 || d.Note != "" || d.Met == nil || *d.Met || !d.Busy {
		t.Errorf("drain row %+v", d)
	}
	if s := rowNamed(t, rows, "(c) sagas/s"); s.Met != nil || !strings.Contains(s.Note, "no plain") {
		t.Errorf("sagas row without a baseline %+v", s)
	}
}

func TestWriteAllTable(t *testing.T) {
	r, o := sampleReports()
	var buf bytes.Buffer
	WriteAllTable(&buf, AllRows(r, o, true, 25))
	out := buf.String()
	flat := strings.Join(strings.Fields(out), " ")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "leg") || !strings.Contains(lines[0], "baseline (same run)") || !strings.HasSuffix(lines[0], "met") {
		t.Fatalf("header %q", lines[0])
	}
	for _, want := range []string{
		"HTTP in-stock, wrk (reservations/s) 13000",
		"20000 raw EVALSHA in-stock",
		"ratio >= 0.60",
		"NO (busy)",
		"yes (busy)",
		"(c) drain time of a 10000 backlog (s) [",
		"<= 120",
		"extrapolated from 2000 sagas at 100.0/s",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ratio <= 120") || strings.Contains(out, "ratio < 5") {
		t.Errorf("a target on the figure printed as on the ratio:\n%s", out)
	}
}

// Each CPU budget row is its two figures of the same run, their ratio and
// the budget; a figure not measured leaves its row out.
func TestBudgetRows(t *testing.T) {
	r, o := sampleReports()
	r.Cases[0].CPU.RedisUS = 40                                             // raw in-stock
	r.Cases[1].CPU.RedisUS = 12                                             // raw sold-out
	r.Cases[2].GatewayUS, r.Cases[2].CPU.MachineUS = 70, 200                // HTTP in-stock
	r.Cases[2].TopProcesses = []ProcCost{{Name: "rocketmq-broker", US: 12}} // 0.30 of 40
	r.Cases[3].GatewayUS = 30                                               // HTTP sold-out
	o.CreateOrder.CPU.MachineUS = 800
	o.Sagas.CPU = LegCPU{MachineUS: 12000, TopProcesses: []ProcCost{{Name: "temporal", US: 9000}}}
	o.Plain.CPU = LegCPU{MachineUS: 30000, TopProcesses: []ProcCost{{Name: "temporal-server", US: 22500}}}
	rows := AllRows(r, o, false, 25)
	for _, tc := range []struct {
		leg   string
		ratio float64
		met   bool
	}{
		{"CPU budget: gateway per admitted", 1.75, false},
		{"CPU budget: broker per admitted", 0.30, true},
		{"CPU budget: machine per HTTP admission", 2.5, false},
		{"CPU budget: gateway per sold-out", 2.5, false},
		{"CPU budget: machine per saga", 15, false},
		{"CPU budget: Temporal server per saga", 0.40, false},
	} {
		row := rowNamed(t, rows, tc.leg)
		if d := row.Ratio - tc.ratio; d < -1e-9 || d > 1e-9 || row.Met == nil || *row.Met != tc.met || !row.TargetOnRatio || row.Target[:2] != "<=" {
			t.Errorf("%s: ratio %.3f met %v target %q, want %.2f %v", tc.leg, row.Ratio, row.Met, row.Target, tc.ratio, tc.met)
		}
	}
	r.Cases[2].TopProcesses = nil // the broker not among the top processes: no row, not a met budget
	for _, row := range AllRows(r, o, false, 25) {
		if row.Leg == "CPU budget: broker per admitted reservation (µs)" {
			t.Errorf("row from an unmeasured figure: %+v", row)
		}
	}
}

// The counts per operation come out as reference rows.
func TestShapeRows(t *testing.T) {
	r, o := sampleReports()
	r.Cases[0].RedisCommands, r.Cases[2].RedisCommands = 1, 2.5
	o.Sagas.History = &HistoryShape{Sampled: 20, Events: 31, WorkflowTasks: 6, Activities: 4, Markers: 3, Upserts: 2}
	rows := AllRows(r, o, false, 25)
	if c := rowNamed(t, rows, "Redis commands per admitted"); c.Ratio != 2.5 || c.Met != nil {
		t.Errorf("commands row %+v", c)
	}
	if e := rowNamed(t, rows, "saga history events"); e.Project != 31 || !strings.Contains(e.Note, "20 sagas sampled") {
		t.Errorf("events row %+v", e)
	}
	if w := rowNamed(t, rows, "saga workflow tasks"); w.Project != 6 || !strings.Contains(w.Note, "4.0 activities, 3.0 markers") {
		t.Errorf("tasks row %+v", w)
	}
}
