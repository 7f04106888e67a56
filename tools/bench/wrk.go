package bench

// wrk (the C HTTP load generator, Debian package wrk) driving the gateway's
// reserve endpoint with wrk.lua: one pre-minted token and one fresh
// Idempotency-Key per request, N requests in all, and one machine-readable
// summary line that ParseWrkOutput reads.

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed" // wrk.lua
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed wrk.lua
var wrkScript []byte

// WrkRun is one wrk run against one URL.
type WrkRun struct {
	Path        string // the wrk executable
	URL         string
	Threads     int      // -t
	Connections int      // -c (a multiple of Threads)
	Tokens      []string // one bearer token per request (without "Bearer ")
	// Rate paces the requests (per second, all threads); 0: closed loop.
	Rate float64
	// WantStatus and WantCode make an answer expected (e.g. 202, QUEUED).
	WantStatus int
	WantCode   string
	// Served, if set, counts the answers the server wrote: a run that sees
	// it stand still for StallAfter is stopped (a lost request leaves a
	// thread waiting for its last answer).
	Served     func() int64
	StallAfter time.Duration
	// Progress, if set, is called every 5 s with Served's count.
	Progress func(served int64, elapsed time.Duration)
}

// WrkResult is what one wrk run measured: wrk.lua's summary line.
type WrkResult struct {
	Requests   int64 `json:"requests"` // answers wrk counted (complete)
	Answered   int64 `json:"answered"` // answers the script saw
	Expected   int64 `json:"expected"`
	Unexpected int64 `json:"unexpected"`
	DurationUS int64 `json:"duration_us"`
	// Latency percentiles as wrk reports them (µs, wrk's histogram after
	// its coordinated-omission correction).
	P50US, P90US, P99US, MaxUS int64
	MeanUS                     float64
	Errors                     map[string]int64 `json:"errors"` // connect, read, write, timeout, status
	Status                     map[int]int      `json:"status"`
	Samples                    []string         `json:"samples,omitempty"`
	// Set by Run, not parsed.
	CPU     time.Duration `json:"-"` // user+system time of the wrk process
	Stopped string        `json:"stopped,omitempty"`
	Argv    []string      `json:"-"`
}

// SocketErrors is the sum of wrk's connect, read, write and timeout errors.
func (r WrkResult) SocketErrors() int64 {
	return r.Errors["connect"] + r.Errors["read"] + r.Errors["write"] + r.Errors["timeout"]
}

// Argv is wrk's command line for the script at script and the token file.
func (w WrkRun) Argv(script, tokens, salt string, d time.Duration) []string {
	return []string{w.Path, "-t", strconv.Itoa(w.Threads), "-c", strconv.Itoa(w.Connections),
		"-d", fmt.Sprintf("%ds", max(1, int(d.Seconds()))), "--timeout", "10s", "-s", script, w.URL, "--",
		tokens, strconv.Itoa(w.Threads), salt, strconv.FormatFloat(w.Rate, 'f', 3, 64),
		fmt.Sprintf("%d:%s", w.WantStatus, w.WantCode)}
}

// Run writes the script and the tokens to a temporary folder, runs wrk until
// each of its threads has had its last answer (then SIGINT ends wrk, which
// otherwise runs for -d), and parses its summary.
func (w WrkRun) Run(ctx context.Context) (WrkResult, error) {
	if w.Threads < 1 || w.Connections < w.Threads || w.Connections%w.Threads != 0 || len(w.Tokens) < w.Threads {
		return WrkResult{}, fmt.Errorf("wrk: %d threads, %d connections, %d tokens: want connections a multiple of threads and a token per thread",
			w.Threads, w.Connections, len(w.Tokens))
	}
	dir, err := os.MkdirTemp("", "seckill-wrk-")
	if err != nil {
		return WrkResult{}, err
	}
	defer os.RemoveAll(dir)
	script, tokens := filepath.Join(dir, "reserve.lua"), filepath.Join(dir, "tokens")
	if err := os.WriteFile(script, wrkScript, 0o600); err != nil {
		return WrkResult{}, err
	}
	if err := writeLines(tokens, w.Tokens); err != nil {
		return WrkResult{}, err
	}
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return WrkResult{}, err
	}
	d := time.Hour
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	argv := w.Argv(script, tokens, hex.EncodeToString(salt[:]), d)
	res, err := w.exec(ctx, argv)
	res.Argv = argv
	return res, err
}

// exec runs wrk and reads its output as it comes.
func (w WrkRun) exec(ctx context.Context, argv []string) (WrkResult, error) {
	cmd := exec.Command(argv[0], argv[1:]...) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return WrkResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return WrkResult{}, fmt.Errorf("wrk: %w", err)
	}
	var lines []string
	threadsDone := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		var once sync.Once
		n := 0
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			lines = append(lines, line)
			if strings.HasPrefix(line, "seckill-wrk-thread-done ") {
				if n++; n == w.Threads {
					once.Do(func() { close(threadsDone) })
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	stopped := w.watch(ctx, threadsDone, readDone)
	_ = cmd.Process.Signal(syscall.SIGINT) // wrk prints its summary on SIGINT
	kill := time.AfterFunc(15*time.Second, func() { _ = cmd.Process.Kill() })
	<-readDone
	waitErr := cmd.Wait()
	kill.Stop()
	res, perr := ParseWrkOutput(strings.NewReader(strings.Join(lines, "\n")))
	res.Stopped = stopped
	if cmd.ProcessState != nil {
		res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if perr != nil {
		return res, fmt.Errorf("wrk: %v (%v): %s", perr, waitErr, tail(stderr.String()+strings.Join(lines, "\n"), 500))
	}
	return res, nil
}

// watch waits until every wrk thread is done, wrk ends, ctx ends or the
// server's answer count stands still for StallAfter; it says why, if not
// the first.
func (w WrkRun) watch(ctx context.Context, threadsDone, readDone <-chan struct{}) string {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last int64 = -1
	start, lastChange, lastProgress := time.Now(), time.Now(), time.Now()
	for {
		select {
		case <-threadsDone:
			return ""
		case <-readDone:
			return "wrk ended before its last answer"
		case <-ctx.Done():
			return "context ended"
		case <-tick.C:
		}
		if w.Served == nil || w.StallAfter <= 0 {
			continue
		}
		n := w.Served()
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > w.StallAfter {
			return fmt.Sprintf("no answer for %s (a request lost: socket error?)", w.StallAfter)
		}
		if w.Progress != nil && time.Since(lastProgress) >= 5*time.Second {
			w.Progress(n, time.Since(start))
			lastProgress = time.Now()
		}
	}
}

func writeLines(path string, lines []string) error {
	f, err := os.Create(path) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	for _, l := range lines {
		_, _ = bw.WriteString(l)
		_ = bw.WriteByte('\n')
	}
	return errors.Join(bw.Flush(), f.Close())
}

// ParseWrkOutput reads wrk.lua's "seckill-wrk key=value ..." summary line
// and its "seckill-wrk-sample ..." lines from wrk's output; the rest of the
// output (wrk's own summary) is ignored.
func ParseWrkOutput(r io.Reader) (WrkResult, error) {
	res := WrkResult{Errors: map[string]int64{}, Status: map[int]int{}}
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if s, ok := strings.CutPrefix(line, "seckill-wrk-sample "); ok {
			res.Samples = append(res.Samples, s)
			continue
		}
		fields, ok := strings.CutPrefix(line, "seckill-wrk ")
		if !ok {
			continue
		}
		if found {
			return res, errors.New("two seckill-wrk summary lines")
		}
		found = true
		if err := res.parseFields(strings.Fields(fields)); err != nil {
			return res, err
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !found {
		return res, errors.New("no seckill-wrk summary line (did the script's done() run?)")
	}
	return res, nil
}

func (res *WrkResult) parseFields(fields []string) error {
	ints := map[string]*int64{"requests": &res.Requests, "answered": &res.Answered, "expected": &res.Expected,
		"unexpected": &res.Unexpected, "duration_us": &res.DurationUS, "p50_us": &res.P50US, "p90_us": &res.P90US,
		"p99_us": &res.P99US, "max_us": &res.MaxUS}
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("seckill-wrk: field %q is not key=value", f)
		}
		if k == "mean_us" {
			m, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("seckill-wrk: %s: %w", k, err)
			}
			res.MeanUS, seen[k] = m, true
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("seckill-wrk: %s=%q is not a count", k, v)
		}
		switch {
		case ints[k] != nil:
			*ints[k] = n
		case strings.HasPrefix(k, "err_"):
			res.Errors[strings.TrimPrefix(k, "err_")] = n
		case strings.HasPrefix(k, "status_"):
			code, err := strconv.Atoi(strings.TrimPrefix(k, "status_"))
			if err != nil {
				return fmt.Errorf("seckill-wrk: bad status field %q", k)
			}
			res.Status[code] += int(n)
		default:
			return fmt.Errorf("seckill-wrk: unknown field %q", k)
		}
		seen[k] = true
	}
	for _, k := range []string{"requests", "answered", "expected", "unexpected", "duration_us", "p50_us", "p99_us", "mean_us"} {
		if !seen[k] {
			return fmt.Errorf("seckill-wrk: summary lacks %s", k)
		}
	}
	var sum int64
	for _, n := range res.Status {
		sum += int64(n)
	}
	if sum != res.Answered || res.Expected+res.Unexpected != res.Answered {
		return fmt.Errorf("seckill-wrk: %d answered but statuses add up to %d, expected+unexpected to %d",
			res.Answered, sum, res.Expected+res.Unexpected)
	}
	return nil
}
