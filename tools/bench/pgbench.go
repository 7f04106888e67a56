package bench

// pgbench as the baseline of the order transaction: its script, the
// command line, and parsing of its output and per-transaction log.

import (
	"bufio"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// baselineScript is leg (a), the baseline of the order transaction of
// MEASURED.md: its four statements as a pgbench script, fixed so that its
// numbers stay comparable from run to run. It is no copy of CreateOrder:
// leg (b) calls CreateOrder itself.
//
//go:embed order_baseline.sql
var baselineScript string

// baselineVars are the script's -D variables for one hot SKU. pgbench binds
// them as parameters (-M prepared), so the JSON payload needs no escaping.
func baselineVars(activityID, skuID, priceCents int64, group, topic string, hash, payload []byte, timeoutS int) []string {
	return []string{"activity=" + strconv.FormatInt(activityID, 10), "sku=" + strconv.FormatInt(skuID, 10),
		"price=" + strconv.FormatInt(priceCents, 10), "timeout=" + strconv.Itoa(timeoutS), "grp=" + group, "topic=" + topic,
		"hash=" + hex.EncodeToString(hash), "payload=" + string(payload)}
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
	Vars      []string      // -D name=value each
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
	for _, v := range a.Vars {
		argv = append(argv, "-D", v)
	}
	return append(argv, a.Database)
}
