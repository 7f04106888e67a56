package bench

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The baseline script is the four statements of the baseline in one
// transaction, with no variable but :uid and the bench's -D ones (pgbench
// fails a run on a variable it does not know).
func TestBaselineScriptStatementsAndVariables(t *testing.T) {
	vars := map[string]bool{}
	for _, v := range regexp.MustCompile(`(^|[^:]):([A-Za-z0-9_]+)`).FindAllStringSubmatch(baselineScript, -1) {
		vars[v[2]] = true
	}
	want := map[string]bool{"uid": true}
	for _, kv := range baselineVars(42, 1, 4999, "g", "t", make([]byte, 32), []byte(`{}`), 900) {
		name, _, _ := strings.Cut(kv, "=")
		want[name] = true
	}
	if !maps.Equal(vars, want) {
		t.Errorf("script variables %v, want %v", vars, want)
	}
	stmts := scriptStatements(baselineScript)
	if len(stmts) != 6 || stmts[0] != "BEGIN;" || stmts[5] != "END;" {
		t.Fatalf("statements %q, want BEGIN, the four of the baseline, END", stmts)
	}
	for i, prefix := range []string{"INSERT INTO consumer_inbox", "UPDATE sku_inventory", "INSERT INTO orders", "INSERT INTO event_outbox"} {
		if !strings.HasPrefix(stmts[i+1], prefix) {
			t.Errorf("statement %d is %.40q, want %s", i+1, stmts[i+1], prefix)
		}
	}
}

const pgbench15Output = `pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: order.sql
scaling factor: 1
query mode: prepared
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 3896
number of failed transactions: 0 (0.000%)
latency average = 10.098 ms
initial connection time = 101.933 ms
tps = 792.271046 (without initial connection time)
`

func TestParsePGBench(t *testing.T) {
	r, err := ParsePGBench(strings.ReplaceAll(pgbench15Output, "\n", "\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := PGBenchResult{TPS: 792.271046, Processed: 3896, Failed: 0, LatencyAvgMS: 10.098}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	if _, err := ParsePGBench("pgbench: error: connection refused\n"); err == nil {
		t.Fatal("no error without a tps line")
	}
	if _, err := ParsePGBench("tps = 10.0 (without initial connection time)\n"); err == nil {
		t.Fatal("no error without the processed line")
	}
}

func TestParsePGBenchLog(t *testing.T) {
	log := "0 1 17368 0 1796020108 766714\n2 1 23024 0 1796020108 773009\n\n3 7 failed 0 1796020108 781917\n"
	got, err := ParsePGBenchLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{17368 * time.Microsecond, 23024 * time.Microsecond}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := ParsePGBenchLog(strings.NewReader("0 1 2\n")); err == nil {
		t.Fatal("no error for a short line")
	}
}

func TestPGBenchArgv(t *testing.T) {
	a := PGBenchArgs{Path: "pgbench", Host: "127.0.0.1", Port: 15432, User: "seckill", Database: "seckill_bench_x",
		Clients: 8, Threads: 2, Duration: 19500 * time.Millisecond, Script: "order.sql", LogPrefix: "/tmp/x/log",
		Vars: []string{"a=1", `b={"c":2}`}}
	got := strings.Join(a.Argv(), " ")
	want := "pgbench -n -M prepared -c 8 -j 2 -T 20 -f order.sql -h 127.0.0.1 -p 15432 -U seckill -l --log-prefix=/tmp/x/log -D a=1 -D b={\"c\":2} seckill_bench_x"
	if got != want {
		t.Fatalf("argv\n got %s\nwant %s", got, want)
	}
}

func TestCPUWindowCost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := CPUWindow{at: t0, busy: 1000, total: 2000, procs: ProcTicks{
		1: {Name: "postgres", Ticks: 100}, 2: {Name: "seckill", Ticks: 50}, 3: {Name: "cc1", Ticks: 10}}}
	// 10 s on 2 CPUs: 2000 jiffies pass, 1500 busy = 75% = 15 core-seconds.
	b := CPUWindow{at: t0.Add(10 * time.Second), busy: 2500, total: 4000, procs: ProcTicks{
		1: {Name: "postgres", Ticks: 900}, 2: {Name: "seckill", Ticks: 350}, 3: {Name: "cc1", Ticks: 210}}}
	c := a.cost(b, 1000, 2, 2, "bench", []ProcCPU{{Name: "pgbench", Seconds: 1}}, map[string]bool{"postgres": true, "pgbench": true})
	if c.MachineBusyPct != 75 {
		t.Errorf("busy %.1f%%, want 75%%", c.MachineBusyPct)
	}
	if c.MachineUS != 15000 {
		t.Errorf("machine %.0f µs/op, want 15000", c.MachineUS)
	}
	// on path: postgres 8 s + bench 3 s + pgbench 1 s = 12 of 15 core-seconds; 3/20 = 15%.
	if c.OffPathPct < 14.99 || c.OffPathPct > 15.01 {
		t.Errorf("off-path %.2f%%, want 15%%", c.OffPathPct)
	}
	names := []string{}
	for _, p := range c.TopProcesses {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"postgres", "bench", "cc1", "pgbench"}) || c.TopProcesses[0].US != 8000 {
		t.Errorf("top processes %+v", c.TopProcesses)
	}
}

func TestMilestones(t *testing.T) {
	at := []float64{1, 2, 3, 4, 5, 6}
	done := []int64{0, 100, 500, 900, 990, 1000}
	m, steady := Milestones(at, done, 1000)
	want := map[string]float64{"10%": 2, "50%": 3, "90%": 4, "100%": 6}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s at %.0f, want %.0f", k, m[k], v)
		}
	}
	if steady != 400 {
		t.Errorf("steady %.1f/s, want 400", steady)
	}
	if _, s := Milestones([]float64{1}, []int64{5}, 1000); s != 0 {
		t.Errorf("steady %.1f without milestones", s)
	}
}

func TestOrderReportText(t *testing.T) {
	r := &OrderReport{Command: "seckill bench order", CPUs: 2, GOMAXPROCS: 2,
		PGBench:     &OrderLeg{Name: "(a) pgbench", Ops: 100, Concurrency: 8, ElapsedS: 1, PerS: 100, LatencyMeasured: true, P50MS: 1, P99MS: 2, MeanMS: 1.2},
		CreateOrder: &OrderLeg{Name: "(b) CreateOrder", Ops: 70, Concurrency: 8, ElapsedS: 1, PerS: 70, LatencyMeasured: true},
		Sagas:       &SagaLeg{Sagas: 1000, Starters: 16, StartS: 2, StartsPS: 500, DrainS: 20, SagasPS: 50, SteadyPS: 55},
		Ratios:      []Ratio{NewRatio("b/a", 70, 100, ">=", 0.8)},
	}
	var b bytes.Buffer
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{"(a) pgbench", "(b) CreateOrder", "(c) sagas: drain", "NO (88% of the target)",
		"drain time 20.0 s", "sagas/s end to end from a backlog of 1000 reservations: 50.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestWaitStatesAndShares(t *testing.T) {
	counts := map[string]int{}
	for _, x := range [][3]string{
		{"active", "Lock", "transactionid"}, {"active", "Lock", "transactionid"}, {"active", "", ""},
		{"idle in transaction", "Client", "ClientRead"}, {"active", "IO", "WALSync"}, {"idle", "Client", "ClientRead"},
		{"active", "Lock", "transactionid"}, {"active", "Lock", "transactionid"},
	} {
		counts[WaitState(x[0], x[1], x[2])]++
	}
	got := WaitShares(counts)
	if len(got) != 5 || got[0].State != "Lock:transactionid (row lock of another transaction)" || got[0].Pct != 50 {
		t.Fatalf("shares %+v", got)
	}
	for _, want := range []string{"running (CPU)", "IO:WALSync", "in transaction, waiting for the client", "idle (between transactions)"} {
		found := false
		for _, x := range got {
			found = found || x.State == want && x.Pct == 12.5
		}
		if !found {
			t.Errorf("no %q at 12.5%% in %+v", want, got)
		}
	}
}

func TestCPUWindowCountsExitedChildren(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := CPUWindow{at: t0, busy: 0, total: 1000, procs: ProcTicks{1: {Name: "postgres", Ticks: 10}, 2: {Name: "seckill", Ticks: 0}},
		children: ProcTicks{1: {Name: "postgres", Ticks: 100}, 2: {Name: "seckill", Ticks: 5}}}
	b := CPUWindow{at: t0.Add(5 * time.Second), busy: 1000, total: 2000, procs: ProcTicks{1: {Name: "postgres", Ticks: 60}, 2: {Name: "seckill", Ticks: 100}},
		children: ProcTicks{1: {Name: "postgres", Ticks: 400}, 2: {Name: "seckill", Ticks: 305}, 3: {Name: "new", Ticks: 50}}}
	c := a.cost(b, 100, 2, 2, "bench", []ProcCPU{{Name: "pgbench", Seconds: 3}}, nil)
	got := map[string]float64{}
	for _, p := range c.TopProcesses {
		got[p.Name] = p.US
	}
	// postgres: 0.5 s itself + 3 s of exited backends = 3.5 s over 100 ops;
	// this process's children (pgbench) come from the caller, not cutime.
	want := map[string]float64{"postgres": 35000, "pgbench": 30000, "bench": 10000}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %.0f µs/op, want %.0f (all %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["new"]; ok {
		t.Errorf("a parent that appeared within the window was counted: %v", got)
	}
}
