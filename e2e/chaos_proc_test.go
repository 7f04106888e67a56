// Package chaos proves convergence by killing things: the crash-point matrix
// (every matrix failpoint armed on its real path in a real seckill process,
// the process killed there and restarted, the invariants checked each time)
// and the kill soak (random SIGKILLs of the gateway, the workers, the
// Temporal server, the broker, PostgreSQL and Redis under load). The
// processes are the real bin/seckill subcommands on the project's stack;
// this package only starts, kills and watches them, drives sales over HTTP
// and reads the stores to judge.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seckill/seckill/internal/platform/failpoint"
)

// Proc is one seckill process the harness runs, kills and restarts.
type Proc struct {
	Name    string
	bin     string
	args    []string
	env     []string
	ready   string // URL answering 200 once the process serves
	metrics string // its /metrics URL
	logs    string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	crashed string // the failpoint the last incarnation died at ("" if none)
	starts  int
	pids    []int // of every incarnation, in order
}

// Start runs a new incarnation with failpoints armed by spec (the
// SECKILL_FAILPOINTS syntax; "" for none) and waits until it serves.
func (p *Proc) Start(ctx context.Context, spec string) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s is running", p.Name)
	}
	p.starts++
	f, err := os.OpenFile(filepath.Join(p.logs, p.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	fmt.Fprintf(f, "\n=== %s start %d, failpoints %q, %s\n", p.Name, p.starts, spec, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
	cmd.Env = append(append(os.Environ(), p.env...), "SECKILL_FAILPOINTS="+spec)
	cmd.Stdout = f
	stderr, err := cmd.StderrPipe()
	if err != nil {
		_ = f.Close()
		p.mu.Unlock()
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.crashed = cmd, done, ""
	p.pids = append(p.pids, cmd.Process.Pid)
	p.mu.Unlock()
	go func() {
		crashed := watchStderr(stderr, f)
		_ = cmd.Wait()
		_ = f.Close()
		p.mu.Lock()
		p.cmd, p.crashed = nil, crashed
		p.mu.Unlock()
		close(done)
	}()
	return p.waitReady(ctx, done)
}

// watchStderr copies the process's stderr to its log and returns the
// failpoint it announced crashing at, if any.
func watchStderr(r io.Reader, log io.Writer) string {
	crashed := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		if rest, ok := strings.CutPrefix(line, failpoint.CrashMarker); ok {
			crashed, _, _ = strings.Cut(rest, " ")
		}
	}
	return crashed
}

func (p *Proc) waitReady(ctx context.Context, done <-chan struct{}) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := c.Get(p.ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited while starting (see %s)", p.Name, filepath.Join(p.logs, p.Name+".log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after 60s", p.Name, p.ready)
		}
	}
}

// Pids are the process ids of every incarnation so far, in order (a
// Temporal client's default identity starts with its pid).
func (p *Proc) Pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pids)
}

// Running reports whether an incarnation runs.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Exited returns a channel closed when the current incarnation ends (nil if none runs).
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.done
}

// Crashed is the failpoint the last incarnation died at ("" if it did not).
func (p *Proc) Crashed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashed
}

// Kill sends sig to the incarnation's process group and waits for it to end.
func (p *Proc) Kill(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil
	}
}

// Signal sends sig to the incarnation's process group without waiting (say
// SIGSTOP and SIGCONT to freeze and thaw it).
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// Stop ends the incarnation gracefully (SIGTERM).
func (p *Proc) Stop() error { return p.Kill(syscall.SIGTERM) }

// everyStarterStarted reports whether every saga starter replica has
// started a saga (so each holds some of the topic's queues); trivially true
// for one.
func (c *Cluster) everyStarterStarted(ctx context.Context) bool {
	if c.replicas < 2 {
		return true
	}
	for _, p := range c.Replicas(ProcStarter) {
		if n, err := p.sagasStarted(ctx); err != nil || n == 0 {
			return false
		}
	}
	return true
}

// sagasStarted is how many sagas a starter process started (its metrics).
func (p *Proc) sagasStarted(ctx context.Context) (float64, error) {
	m, err := scrape(ctx, p.metrics)
	return m[`seckill_order_consume_total{result="started"}`], err
}

// scrape reads a process's Prometheus text metrics into name{labels} → value.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}
