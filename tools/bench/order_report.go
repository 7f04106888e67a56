package bench

// The order bench (`seckill bench order`, docs/benchmarks.md): the
// PostgreSQL order transaction measured three ways in one run. This file
// holds the parts that need no running service: the pgbench script of the
// baseline, parsing of pgbench's output and per-transaction log, CPU
// windows, and the report. cmd/seckill/bench_order.go wires them to the
// stack.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PGBenchScript is the baseline transaction of MEASURED.md as a pgbench
// custom script: inbox INSERT ON CONFLICT DO NOTHING, conditional stock
// UPDATE of one hot SKU, order INSERT ON CONFLICT DO NOTHING, outbox INSERT,
// in one transaction, on the project's own tables. Every transaction gets
// fresh ids (gen_random_uuid(), built into PostgreSQL 13+) and a random
// user, so every statement really writes, as CreateOrder's do.
type PGBenchScript struct {
	ActivityID    int64
	SKUID         int64
	PriceCents    int64
	ConsumerGroup string // consumer_inbox.consumer_group (CreateOrder's group)
	Topic         string // consumer_inbox.topic
	// PayloadHash stands for the inbox SHA-256 (32 bytes: a CHECK wants them).
	PayloadHash []byte
	// OutboxPayload is a representative ORDER_CREATED payload (JSON object).
	OutboxPayload []byte
	// PaymentTimeoutSeconds sets orders.expires_at, as the sale does.
	PaymentTimeoutSeconds int
	// StockLast makes ReplayText a what-if: the same statements with the
	// conditional stock UPDATE moved last, after a SAVEPOINT (to roll back to
	// when it finds no stock), so the hot row's lock is held only for the
	// UPDATE and the COMMIT.
	StockLast bool
}

// MaxPGBenchUser bounds the random user ids of the script: with about 10^5
// transactions per run a collision (an order INSERT that does nothing) has
// a probability below 10^-9.
const MaxPGBenchUser = 9_000_000_000_000_000_000

// Text returns the script. pgbench turns every ":name" into a variable, even
// inside string literals, so the JSON payload is written as an E'...' literal
// with its colons escaped (\x3a): PostgreSQL's lexer reads it once, when the
// statement is prepared.
func (s PGBenchScript) Text() (string, error) {
	switch {
	case s.ActivityID <= 0 || s.SKUID <= 0:
		return "", errors.New("pgbench script: activity and SKU ids must be positive")
	case len(s.PayloadHash) != 32:
		return "", errors.New("pgbench script: payload hash must be 32 bytes")
	case len(s.OutboxPayload) == 0 || s.OutboxPayload[0] != '{':
		return "", errors.New("pgbench script: outbox payload must be a JSON object")
	case s.PaymentTimeoutSeconds <= 0:
		return "", errors.New("pgbench script: payment timeout must be positive")
	}
	for _, v := range []string{s.ConsumerGroup, s.Topic} {
		if v == "" || strings.ContainsAny(v, "':\\") {
			return "", fmt.Errorf("pgbench script: %q must be non-empty without quotes, colons or backslashes", v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- seckill bench order (a): the four statements of the baseline on one hot SKU (activity %d, SKU %d)\n", s.ActivityID, s.SKUID)
	fmt.Fprintf(&b, "\\set uid random(1, %d)\n", int64(MaxPGBenchUser))
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code) "+
		"VALUES ('%s', gen_random_uuid(), '%s', 'ORDER_CREATE_REQUESTED', gen_random_uuid(), gen_random_uuid(), '\\x%s'::bytea, 'PROCESSING') "+
		"ON CONFLICT (consumer_group, message_id) DO NOTHING;\n", s.ConsumerGroup, s.Topic, hex.EncodeToString(s.PayloadHash))
	fmt.Fprintf(&b, "UPDATE sku_inventory SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1, "+
		"version = version + 1, updated_at = clock_timestamp() WHERE activity_id = %d AND sku_id = %d AND available_stock > 0;\n",
		s.ActivityID, s.SKUID)
	fmt.Fprintf(&b, "INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at) "+
		"VALUES (gen_random_uuid(), %d, %d, :uid, gen_random_uuid(), gen_random_uuid(), %d, 'CREATED', clock_timestamp() + make_interval(secs => %d)) "+
		"ON CONFLICT DO NOTHING;\n", s.ActivityID, s.SKUID, s.PriceCents, s.PaymentTimeoutSeconds)
	fmt.Fprintf(&b, "INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload) "+
		"VALUES (gen_random_uuid(), 'ORDER', gen_random_uuid(), 'ORDER_CREATED', 1, gen_random_uuid()::text, %s::jsonb) "+
		"ON CONFLICT (event_id) DO NOTHING;\n", pgEscapedLiteral(string(s.OutboxPayload)))
	b.WriteString("END;\n")
	return b.String(), nil
}

// ReplayText returns a pgbench script that replays the statements of
// CreateOrder's order transaction (activities/order.go, the "order created"
// path) in its order, with the same parameters: inbox INSERT, reservation
// upsert, reservation SELECT FOR UPDATE, sale read, conditional stock
// UPDATE, order INSERT, ledger INSERT, reservation UPDATE, outbox INSERT,
// inbox UPDATE. It tells the transaction's shape apart from the Go client's
// cost. The ids of one transaction derive from one random number
// (md5(:r || suffix)::uuid), so no extra round trip is needed.
func (s PGBenchScript) ReplayText() (string, error) {
	if _, err := s.Text(); err != nil { // same validation
		return "", err
	}
	id := func(suffix string) string { return "md5(:r::text || '" + suffix + "')::uuid" }
	rid, mid, qid, oid := id("r"), id("m"), id("q"), id("o")
	a, k := s.ActivityID, s.SKUID
	var b strings.Builder
	fmt.Fprintf(&b, "-- seckill bench order: CreateOrder's statements replayed by pgbench (activity %d, SKU %d, stock update last %v)\n", a, k, s.StockLast)
	fmt.Fprintf(&b, "\\set uid random(1, %d)\n", int64(MaxPGBenchUser))
	fmt.Fprintf(&b, "\\set r random(1, %d)\n", int64(MaxPGBenchUser))
	b.WriteString("BEGIN ISOLATION LEVEL READ COMMITTED;\n")
	fmt.Fprintf(&b, "INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code) "+
		"VALUES ('%s', %s, '%s', 'ORDER_CREATE_REQUESTED', %s, %s, '\\x%s'::bytea, 'PROCESSING') "+
		"ON CONFLICT (consumer_group, message_id) DO NOTHING;\n", s.ConsumerGroup, mid, s.Topic, rid, qid, hex.EncodeToString(s.PayloadHash))
	fmt.Fprintf(&b, "INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline) "+
		"VALUES (%s, %s, %d, %d, :uid, %s, 'RESERVED', clock_timestamp(), clock_timestamp() + interval '1 hour') "+
		"ON CONFLICT (reservation_id) DO NOTHING;\n", rid, qid, a, k, mid)
	fmt.Fprintf(&b, "SELECT status, order_id FROM inventory_reservation WHERE reservation_id = %s FOR UPDATE;\n", rid)
	fmt.Fprintf(&b, "SELECT clock_timestamp(), clock_timestamp() + make_interval(secs => a.payment_timeout_seconds), i.price_cents "+
		"FROM sale_activity a JOIN sku_inventory i ON i.activity_id = a.activity_id WHERE a.activity_id = %d AND i.sku_id = %d;\n", a, k)
	stock := fmt.Sprintf("UPDATE sku_inventory SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1, "+
		"version = version + 1, updated_at = clock_timestamp() WHERE activity_id = %d AND sku_id = %d AND available_stock > 0;\n", a, k)
	if s.StockLast {
		b.WriteString("SAVEPOINT before_order;\n")
	} else {
		b.WriteString(stock)
	}
	fmt.Fprintf(&b, "INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at) "+
		"VALUES (%s, %d, %d, :uid, %s, %s, %d, 'CREATED', clock_timestamp() + make_interval(secs => %d)) ON CONFLICT DO NOTHING;\n",
		oid, a, k, qid, rid, s.PriceCents, s.PaymentTimeoutSeconds)
	fmt.Fprintf(&b, "INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied) "+
		"VALUES ('OCCUPY:' || %s::text, %d, %d, %s, %s, 'OCCUPY', -1, 1);\n", rid, a, k, rid, oid)
	fmt.Fprintf(&b, "UPDATE inventory_reservation SET status = 'ORDER_CREATED', order_id = %s, version = version + 1, updated_at = clock_timestamp() "+
		"WHERE reservation_id = %s AND status = 'RESERVED';\n", oid, rid)
	fmt.Fprintf(&b, "INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload) "+
		"VALUES (gen_random_uuid(), 'ORDER', %s, 'ORDER_CREATED', 1, %s::text, %s::jsonb) ON CONFLICT (event_id) DO NOTHING;\n",
		oid, rid, pgEscapedLiteral(string(s.OutboxPayload)))
	fmt.Fprintf(&b, "UPDATE consumer_inbox SET result_code = 'ORDER_CREATED', order_id = %s, processed_at = clock_timestamp() "+
		"WHERE consumer_group = '%s' AND message_id = %s;\n", oid, s.ConsumerGroup, mid)
	if s.StockLast {
		b.WriteString(stock)
	}
	b.WriteString("END;\n")
	return b.String(), nil
}

// pgEscapedLiteral writes s as an E'...' string literal in which no colon,
// quote or backslash appears literally.
func pgEscapedLiteral(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, `:`, `\x3a`, "\n", `\n`)
	return "E'" + r.Replace(s) + "'"
}

// PGBenchResult is what pgbench printed at the end of a run.
type PGBenchResult struct {
	TPS          float64 // "tps = N (without initial connection time)"
	Processed    int64   // "number of transactions actually processed: N"
	Failed       int64   // "number of failed transactions: N" (PostgreSQL 15+)
	LatencyAvgMS float64 // "latency average = N ms"
}

var (
	pgbTPS       = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	pgbProcessed = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
	pgbFailed    = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
	pgbLatency   = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
)

// ParsePGBench reads the summary pgbench prints (PostgreSQL 14+: "tps = N
// (without initial connection time)"). The tps and processed lines are
// required; the others are optional.
func ParsePGBench(out string) (PGBenchResult, error) {
	out = strings.ReplaceAll(out, "\r", "")
	var r PGBenchResult
	m := pgbTPS.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New(`pgbench output has no "tps = N (without initial connection time)" line`)
	}
	var err error
	if r.TPS, err = strconv.ParseFloat(m[1], 64); err != nil {
		return r, fmt.Errorf("pgbench tps %q: %w", m[1], err)
	}
	if m = pgbProcessed.FindStringSubmatch(out); m == nil {
		return r, errors.New(`pgbench output has no "number of transactions actually processed" line`)
	}
	if r.Processed, err = strconv.ParseInt(m[1], 10, 64); err != nil {
		return r, fmt.Errorf("pgbench processed %q: %w", m[1], err)
	}
	if m = pgbFailed.FindStringSubmatch(out); m != nil {
		r.Failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = pgbLatency.FindStringSubmatch(out); m != nil {
		r.LatencyAvgMS, _ = strconv.ParseFloat(m[1], 64)
	}
	return r, nil
}

// ParsePGBenchLog reads a pgbench per-transaction log (-l): lines of
// "client_id transaction_no time script_no time_epoch time_us [...]", time
// being the transaction's latency in µs. Failed transactions (time
// "failed", "serialization", "deadlock") and skipped ones are left out.
func ParsePGBenchLog(r io.Reader) ([]time.Duration, error) {
	var out []time.Duration
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 6 {
			return out, fmt.Errorf("pgbench log line %d: %d fields, want at least 6", line, len(f))
		}
		us, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue // failed/skipped transaction
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, sc.Err()
}

// PGBenchArgs is one pgbench run of a custom script.
type PGBenchArgs struct {
	Path      string
	Host      string
	Port      uint16
	User      string
	Database  string
	Clients   int           // -c
	Threads   int           // -j
	Duration  time.Duration // -T, whole seconds (rounded up)
	Script    string        // -f
	LogPrefix string        // -l --log-prefix; empty: no per-transaction log
}

// Argv is the command line: no vacuum (-n, the tables are not pgbench's),
// prepared statements (-M prepared, as pgx's statement cache does).
func (a PGBenchArgs) Argv() []string {
	secs := int((a.Duration + time.Second - 1) / time.Second)
	argv := []string{a.Path, "-n", "-M", "prepared", "-c", strconv.Itoa(a.Clients), "-j", strconv.Itoa(a.Threads),
		"-T", strconv.Itoa(max(secs, 1)), "-f", a.Script, "-h", a.Host, "-p", strconv.Itoa(int(a.Port)), "-U", a.User}
	if a.LogPrefix != "" {
		argv = append(argv, "-l", "--log-prefix="+a.LogPrefix)
	}
	return append(argv, a.Database)
}

// CPUWindow is a CPU snapshot of the machine and every process at the start
// of a leg.
type CPUWindow struct {
	at          time.Time
	busy, total uint64
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

// readChildTicks reads cutime + cstime of every process.
func readChildTicks() ProcTicks {
	out := ProcTicks{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(d + "/stat") // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
		if err != nil {
			continue
		}
		comm, ticks, err := ParseProcPIDChildStat(string(raw))
		if err != nil || ticks == 0 {
			continue
		}
		out[pid] = ProcEntry{Name: comm, Ticks: ticks}
	}
	return out
}

// ParseProcPIDChildStat returns the command name and cutime+cstime (the CPU
// of waited-for children) of a /proc/<pid>/stat line.
func ParseProcPIDChildStat(s string) (comm string, ticks uint64, err error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("not a /proc/<pid>/stat line: %q", s)
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	// after the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14)
	if len(f) < 15 {
		return "", 0, fmt.Errorf("short /proc/<pid>/stat line: %q", s)
	}
	cu, err1 := strconv.ParseInt(f[13], 10, 64)
	cs, err2 := strconv.ParseInt(f[14], 10, 64)
	if err1 != nil || err2 != nil || cu < 0 || cs < 0 {
		return "", 0, fmt.Errorf("bad cutime/cstime in %q", s)
	}
	return comm, uint64(cu + cs), nil
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
	if dt := end.total - w.total; dt > 0 && end.total > w.total && wall > 0 {
		c.MachineBusyPct = 100 * float64(end.busy-w.busy) / float64(dt)
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

// OrderReport is the result of one `seckill bench order` run.
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
	Replay         *OrderLeg  `json:"pgbench_replay,omitempty"`
	WhatIf         *OrderLeg  `json:"pgbench_what_if,omitempty"`
	CreateOrder    *OrderLeg  `json:"create_order,omitempty"`
	Broker         *BrokerLeg `json:"broker,omitempty"`
	Sagas          *SagaLeg   `json:"sagas,omitempty"`
	Ratios         []Ratio    `json:"ratios"`
	Notes          []string   `json:"notes,omitempty"`
	Failures       []string   `json:"failures,omitempty"`
}

// WriteText prints the report as tables.
func (r *OrderReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Command)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %.0f GiB; PostgreSQL %s; %s\n", r.CPUs, r.GOMAXPROCS, r.MemGiB,
		r.PGVersion, r.PGBenchVersion)
	fmt.Fprintf(w, "scratch database %s; activity %d; task queue %s; machine %.0f%% busy before the run\n\n",
		r.Database, r.ActivityID, r.TaskQueue, r.BusyBeforePct)

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
	for _, l := range []*OrderLeg{r.PGBench, r.Replay, r.WhatIf, r.CreateOrder} {
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
	for _, l := range []*OrderLeg{r.PGBench, r.Replay, r.WhatIf, r.CreateOrder} {
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
	fmt.Fprintln(w)

	fmt.Fprintln(w, "CPU during each leg: machine busy (% of all CPUs), machine CPU per op (µs of one core), off-path")
	fmt.Fprintln(w, "(share of the machine used by processes not on the leg's path: other people's work, the kernel):")
	type cpuRow struct {
		name string
		c    LegCPU
	}
	var cpus []cpuRow
	for _, l := range []*OrderLeg{r.PGBench, r.Replay, r.WhatIf, r.CreateOrder} {
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
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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
	for _, l := range []*OrderLeg{r.PGBench, r.Replay, r.WhatIf, r.CreateOrder} {
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

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio\tvalue\ttarget\tmet")
	for _, q := range r.Ratios {
		verdict := "yes"
		if !q.Met {
			verdict = "NO"
			if q.Target > 0 && q.Value > 0 {
				verdict += fmt.Sprintf(" (%.0f%% of the target)", 100*q.Value/q.Target)
			}
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s %.2f\t%s\n", q.Name, q.Value, q.Op, q.Target, verdict)
	}
	_ = tw.Flush()
	if s := r.Sagas; s != nil && s.DrainS > 0 {
		fmt.Fprintf(w, "sagas/s end to end from a backlog of %d reservations: %.1f (steady 10%%-90%%: %.1f); drain time %.1f s\n",
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
