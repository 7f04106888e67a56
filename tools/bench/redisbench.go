package bench

// redis-benchmark driving EVALSHA of lua/reserve.lua: the arguments of one
// call, the command line, and parsing of its --csv output.

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/lua"
)

// RandInt is redis-benchmark's placeholder: with -r, every occurrence in an
// argument is replaced, independently, by a 12-digit zero-padded random number.
const RandInt = "__rand_int__"

// MaxKeySpace is the largest -r value: redis-benchmark parses it with atoi
// into an int and draws from random(), so 2^31-1 is the ceiling.
const MaxKeySpace = 2_000_000_000

// uuidPrefix makes "<prefix>__rand_int__" a 36-character UUID-shaped string,
// the same length as the real reservation, message and request ids.
const (
	ridPrefix = "00000000-0000-4000-8000-"
	midPrefix = "00000000-0000-4000-9000-"
	reqPrefix = "00000000-0000-4000-a000-"
)

// ReserveCall describes one EVALSHA of lua/reserve.lua for redis-benchmark.
// Every per-request value (reservation id, request id, user id) is RandInt,
// so each call is a distinct user making a distinct request, as on the
// gateway's path.
type ReserveCall struct {
	SHA           string // lua.ReserveSHA()
	ActivityID    int64
	SKUID         int64
	NowMS         int64 // inside the sale window
	KeyVersion    int
	SchemaVersion int
	TTL           time.Duration // ARGV[10], garbage collection of the keys
	SendDueAtMS   int64         // ARGV[11]; far in the future keeps the send-due scanner away
}

// Args returns the command redis-benchmark runs: EVALSHA sha 6 KEYS... ARGV...
// as lua.ReserveArgs renders them, with RandInt for the user id.
func (c ReserveCall) Args() []string {
	k := lua.Keys{ActivityID: c.ActivityID, SKUID: c.SKUID}
	keys, argv := lua.ReserveArgs{ReservationID: ridPrefix + RandInt, MessageID: midPrefix + RandInt,
		RequestID: reqPrefix + RandInt, NowMS: c.NowMS, KeyVersion: c.KeyVersion, SchemaVersion: c.SchemaVersion,
		TTL: c.TTL, SendDueAtMS: c.SendDueAtMS}.Template(k, RandInt)
	args := append([]string{"EVALSHA", c.SHA, strconv.Itoa(len(keys))}, keys...)
	return append(args, argv...)
}

// RedisBenchmark is one run of the redis-benchmark tool.
type RedisBenchmark struct {
	Path     string // the executable
	Host     string
	Port     int
	Clients  int // -c
	Requests int // -n
	KeySpace int // -r; 0 leaves RandInt unreplaced
	// User and Password authenticate (--user, -a: redis-benchmark reads no
	// environment variable, so the password is on its command line; the
	// benches run only against the local stack, on loopback).
	User, Password string
}

// Argv is the full command line for the command args.
func (b RedisBenchmark) Argv(args []string) []string {
	argv := []string{b.Path, "-h", b.Host, "-p", strconv.Itoa(b.Port),
		"-c", strconv.Itoa(b.Clients), "-n", strconv.Itoa(b.Requests)}
	if b.KeySpace > 0 {
		argv = append(argv, "-r", strconv.Itoa(b.KeySpace))
	}
	if b.User != "" {
		argv = append(argv, "--user", b.User)
	}
	if b.Password != "" {
		argv = append(argv, "-a", b.Password)
	}
	argv = append(argv, "--csv")
	return append(argv, args...)
}

// RawResult is what one redis-benchmark run measured.
type RawResult struct {
	Row     CSVRow
	Elapsed time.Duration // wall time of the process
	CPU     time.Duration // user+system time of the redis-benchmark process
	Argv    []string
}

// Run executes redis-benchmark for args and parses its CSV summary.
func (b RedisBenchmark) Run(ctx context.Context, args []string) (RawResult, error) {
	argv := b.Argv(args)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := RawResult{Elapsed: time.Since(start), Argv: argv}
	if cmd.ProcessState != nil {
		res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return res, fmt.Errorf("redis-benchmark: %w: %s", err, tail(stderr.String()+stdout.String(), 500))
	}
	rows, err := ParseCSV(&stdout)
	if err != nil {
		return res, fmt.Errorf("redis-benchmark output: %w (stderr: %s)", err, tail(stderr.String(), 300))
	}
	if len(rows) != 1 {
		return res, fmt.Errorf("redis-benchmark printed %d result rows, want 1", len(rows))
	}
	res.Row = rows[0]
	return res, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// CSVRow is one result line of redis-benchmark --csv. Redis 7 prints
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
// "p95_latency_ms","p99_latency_ms","max_latency_ms"; older versions print
// only test and rps, in which case HasLatency is false.
type CSVRow struct {
	Test       string
	RPS        float64
	AvgMS      float64
	MinMS      float64
	P50MS      float64
	P95MS      float64
	P99MS      float64
	MaxMS      float64
	HasLatency bool
}

// ErrNoCSV means the output held no redis-benchmark CSV header.
var ErrNoCSV = errors.New(`no "test","rps" CSV header in the output`)

// ParseCSV reads the output of redis-benchmark --csv. Lines before the
// header (warnings) are skipped; columns are found by their header name.
func ParseCSV(r io.Reader) ([]CSVRow, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(raw), "\r", "\n")
	i := strings.Index(text, `"test"`)
	if i < 0 {
		return nil, ErrNoCSV
	}
	cr := csv.NewReader(strings.NewReader(text[i:]))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("csv header: %w", err)
	}
	col := map[string]int{}
	for j, h := range header {
		col[strings.TrimSpace(h)] = j
	}
	if _, ok := col["rps"]; !ok {
		return nil, ErrNoCSV
	}
	var rows []CSVRow
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("csv: %w", err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, fmt.Errorf("csv row has %d fields, header has %d: %q", len(rec), len(header), rec)
		}
		row := CSVRow{Test: rec[col["test"]]}
		num := func(name string) (float64, bool, error) {
			j, ok := col[name]
			if !ok {
				return 0, false, nil
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[j]), 64)
			if err != nil {
				return 0, true, fmt.Errorf("column %s: %q is not a number", name, rec[j])
			}
			return v, true, nil
		}
		if row.RPS, _, err = num("rps"); err != nil {
			return nil, err
		}
		row.HasLatency = true
		for _, f := range []struct {
			name string
			dst  *float64
		}{{"avg_latency_ms", &row.AvgMS}, {"min_latency_ms", &row.MinMS}, {"p50_latency_ms", &row.P50MS},
			{"p95_latency_ms", &row.P95MS}, {"p99_latency_ms", &row.P99MS}, {"max_latency_ms", &row.MaxMS}} {
			v, ok, err := num(f.name)
			if err != nil {
				return nil, err
			}
			*f.dst = v
			if !ok && (f.name == "p50_latency_ms" || f.name == "p99_latency_ms") {
				row.HasLatency = false
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// toolVersion is the first line `path --version` prints (wrk prints it and
// exits 1).
func toolVersion(ctx context.Context, path string) string {
	vctx, c := context.WithTimeout(ctx, 5*time.Second)
	defer c()
	out, _ := exec.CommandContext(vctx, path, "--version").Output() // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	if line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n"); line != "" {
		return strings.TrimSpace(line)
	}
	return filepath.Base(path) + " (version unknown)"
}
