package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/orders"
)

// pgbenchLeg runs leg (a), the baseline script, on a hot SKU of its own.
func (e *orderEnv) pgbenchLeg(ctx context.Context) error {
	name, sku := "(a) pgbench 4 statements", orderSKUPGBench
	dir, err := os.MkdirTemp("", "seckill-bench-order-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "order.sql")
	if err := os.WriteFile(script, []byte(baselineScript), 0o600); err != nil {
		return err
	}
	payload, err := sampleOutboxPayload(e.activity, sku)
	if err != nil {
		return err
	}
	hash := inbox.PayloadHash(sampleMessage(e.activity, sku, 1, time.Now()))
	pgc, err := pgx.ParseConfig(e.dsn)
	if err != nil {
		return err
	}
	args := PGBenchArgs{Path: e.pgbench, Host: pgc.Host, Port: pgc.Port, User: pgc.User, Database: pgc.Database,
		Clients: e.o.Concurrency, Threads: min(2, e.o.Concurrency), Duration: e.o.Duration, Script: script,
		LogPrefix: filepath.Join(dir, "tx"), Vars: baselineVars(e.activity, sku, orderPrice, orders.ConsumerGroup, Topic, hash, payload, 900)}
	e.progress("%s: %s (script %s)", name, strings.Join(args.Argv(), " "), script)
	stock0, err := e.taken(ctx, sku)
	if err != nil {
		return err
	}
	res, cpu, waits, err := e.runPGBench(ctx, name, dir, args, pgc)
	if err != nil {
		return err
	}
	lat, err := pgbenchLatencies(name, args.LogPrefix)
	if err != nil {
		return err
	}
	stock1, err := e.taken(ctx, sku)
	if err != nil {
		return err
	}
	s := Summarize(lat)
	leg := &OrderLeg{Name: name, Ops: res.Processed, Concurrency: e.o.Concurrency, PerS: res.TPS,
		LatencyMeasured: len(lat) > 0, P50MS: MS(s.P50), P99MS: MS(s.P99), MeanMS: res.LatencyAvgMS, CPU: cpu, Waits: waits}
	if res.TPS > 0 {
		leg.ElapsedS = float64(res.Processed) / res.TPS
	}
	leg.Outcome = fmt.Sprintf("%d transactions, %d failed; stock taken %d; %d latencies logged; pgbench -M prepared -c %d -j %d -T %d",
		res.Processed, res.Failed, stock1-stock0, len(lat), args.Clients, args.Threads, int((args.Duration+time.Second-1)/time.Second))
	e.report.PGBench = leg
	e.progress("%s: %.0f tx/s, p50 %.2f ms, p99 %.2f ms", name, leg.PerS, leg.P50MS, leg.P99MS)
	switch {
	case res.Failed > 0:
		return fmt.Errorf("%s: %d failed transactions", name, res.Failed)
	case stock1-stock0 != res.Processed:
		// Every transaction must have taken one unit, or the baseline did less work.
		return fmt.Errorf("%s: %d transactions but %d units of stock taken", name, res.Processed, stock1-stock0)
	}
	return nil
}

// runPGBench runs pgbench in dir, sampling the backends' waits and the CPU
// meanwhile, and parses its summary.
func (e *orderEnv) runPGBench(ctx context.Context, name, dir string, args PGBenchArgs, pgc *pgx.ConnConfig) (PGBenchResult, LegCPU, []WaitShare, error) {
	argv := args.Argv()
	pctx, c := context.WithTimeout(ctx, e.o.Duration+2*time.Minute)
	defer c()
	cmd := exec.CommandContext(pctx, argv[0], argv[1:]...) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PGPASSWORD="+pgc.Password, "PGAPPNAME="+orderAppPGBench)
	if pgc.TLSConfig == nil {
		cmd.Env = append(cmd.Env, "PGSSLMODE=disable")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stopWaits := e.sampleWaits(ctx, orderAppPGBench)
	w := StartCPUWindow()
	runErr := cmd.Run()
	waits := stopWaits()
	var child []ProcCPU
	if cmd.ProcessState != nil {
		child = []ProcCPU{{Name: "pgbench", Seconds: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()}}
	}
	if runErr != nil {
		return PGBenchResult{}, LegCPU{}, nil, fmt.Errorf("%s: %w: %s", name, runErr, tail(out.String(), 800))
	}
	res, err := ParsePGBench(out.String())
	if err != nil {
		return res, LegCPU{}, nil, fmt.Errorf("%s: %w: %s", name, err, tail(out.String(), 800))
	}
	return res, w.Stop(res.Processed, e.ncpu, benchSelf, child, orderPGPath), waits, nil
}

// pgbenchLatencies reads the per-transaction logs pgbench wrote under prefix.
func pgbenchLatencies(name, prefix string) ([]time.Duration, error) {
	var lat []time.Duration
	logs, _ := filepath.Glob(prefix + ".*")
	for _, p := range logs {
		f, err := os.Open(p) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
		if err != nil {
			return nil, err
		}
		l, err := ParsePGBenchLog(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, p, err)
		}
		lat = append(lat, l...)
	}
	return lat, nil
}

// findPGBench resolves --pgbench: the given path, else pgbench on PATH, else
// the newest Debian/Ubuntu PostgreSQL installation's.
func findPGBench(flag string) (string, error) {
	if flag != "" {
		p, err := exec.LookPath(flag)
		if err != nil {
			return "", fmt.Errorf("--pgbench %s: %w", flag, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	best, bestVer := "", -1
	for _, p := range found {
		var v int
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(filepath.Dir(p))), &v); err == nil && v > bestVer {
			best, bestVer = p, v
		}
	}
	if best == "" {
		return "", errors.New("pgbench not found on PATH or in /usr/lib/postgresql/*/bin: pass --pgbench")
	}
	return best, nil
}
