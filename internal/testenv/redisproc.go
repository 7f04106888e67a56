package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/redisx"
)

// PrivateRedis is a redis-server of one test's own (the binary the stack
// script installs), for faults the shared stack must not see: frozen with
// SIGSTOP, thawed with SIGCONT. It is always thawed and stopped when the
// test ends.
type PrivateRedis struct {
	Addr   string
	Client *redis.Client
	cmd    *exec.Cmd
}

// StartPrivateRedis starts a redis-server on a free loopback port with
// persistence off and a password of its own (requirepass, like the stack's)
// and returns it with a client opened as every process opens one
// (redisx.OpenDB: credentials, timeouts, scripts loaded).
func StartPrivateRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (scripts/stack.sh installs it): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	password := fmt.Sprintf("%016x%016x", RandomUint64(), RandomUint64())
	conf := filepath.Join(dir, "redis.conf") // the password in a file, not on the command line
	if err := os.WriteFile(conf, []byte("requirepass "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", dir, // #nosec G204 -- the installed redis-server with this test's own arguments
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	p := &PrivateRedis{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.Client, err = redisx.OpenDB(context.Background(), config.Config{RedisAddr: p.Addr, RedisPassword: password}, 0, 32)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("private redis-server at %s: %v", p.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { _ = p.Client.Close() })
	return p
}

// Freeze stops the server (SIGSTOP): connections stay open, nothing answers.
func (p *PrivateRedis) Freeze(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze redis-server: %v", err)
	}
}

// Thaw resumes it (SIGCONT).
func (p *PrivateRedis) Thaw(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("thaw redis-server: %v", err)
	}
}
