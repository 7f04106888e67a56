package bench

// pgbench as the baseline of the order transaction: the custom scripts,
// the command line, and parsing of its output and per-transaction log.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/inventory"
)

// PGBenchScript is the baseline transaction of MEASURED.md as a pgbench
// custom script: inbox INSERT ON CONFLICT DO NOTHING, conditional stock
// UPDATE of one hot SKU, order INSERT ON CONFLICT DO NOTHING, outbox INSERT,
// in one transaction, on the project's own tables. Every transaction gets
// fresh ids (gen_random_uuid(), built into PostgreSQL 13+) and a random
// user, so every statement really writes, as CreateOrder's do.
//
// It is hand-written on purpose: the published baseline of
// docs/benchmarks.md (issue 4), the four statements of the original order
// transaction, fixed so that its numbers stay comparable from run to run. It
// is no copy of CreateOrder: leg (a') runs CreateOrder's own one statement
// (CallText).
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

// CallText returns leg (a')'s script: CreateOrder's one statement, its call
// of seckill_create_order (internal/orders/create.go), on the script's random
// user, with ids derived per transaction from a random :r (the reservation
// id's text also in the ledger and compensation keys, as the code's).
func (s PGBenchScript) CallText() (string, error) {
	if _, err := s.Text(); err != nil {
		return "", err
	}
	id := func(suffix string) string { return "md5(:r::text || '" + suffix + "')::uuid" }
	key := func(k string) string {
		return pgEscapedLiteral(strings.TrimSuffix(k, uuid.Nil.String())) + " || " + id("r") + "::text"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- seckill bench order (a'): CreateOrder's one statement on one hot SKU (activity %d, SKU %d)\n", s.ActivityID, s.SKUID)
	fmt.Fprintf(&b, "\\set uid random(1, %d)\n\\set r random(1, %d)\n", int64(MaxPGBenchUser), int64(MaxPGBenchUser))
	fmt.Fprintf(&b, "SELECT * FROM seckill_create_order('%s', '%s', %s, 'ORDER_CREATE_REQUESTED', %s, %s, %d, %d, :uid, "+
		"clock_timestamp(), clock_timestamp() + interval '1 hour', '\\x%s'::bytea, %s, %s, %s, %s, %s, %s);\n",
		s.ConsumerGroup, s.Topic, id("m"), id("r"), id("q"), s.ActivityID, s.SKUID, hex.EncodeToString(s.PayloadHash),
		id("o"), id("e"), key(inventory.LedgerOccupyKey(uuid.Nil)), id("t"), key(inventory.CompensationKey(uuid.Nil)), id("c"))
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
