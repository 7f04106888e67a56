package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// TestREADMEUsingIt runs the README's "Using it" block as written, in the
// repository root with bin/seckill built, on the stack, with nothing of the
// test's environment but PATH and HOME: each command must work and answer
// as the comments say. A default that makes the gateway and the workers
// collide (their metrics address) kills one of them, and `kill %1 %2` at
// the end then fails the block.
func TestREADMEUsingIt(t *testing.T) {
	testenv.Require(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, filepath.Join(root, "README.md"), "## Using it")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", "bin/seckill", "./cmd/seckill")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The block takes seconds; one that hangs (reconcile run waits for a
	// worker that died) is cut off.
	bctx, bcancel := context.WithTimeout(ctx, 90*time.Second)
	defer bcancel()
	cmd := exec.CommandContext(bctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // a process the block left behind holds its output open
	out, err := cmd.CombinedOutput()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the block left running
	text := string(out)
	if err != nil {
		t.Fatalf("the README block failed: %v\n%s", err, text)
	}
	for _, want := range []struct{ what, re string }{
		{"sale create", `activity 1001 sku 1: (created|kept)`},
		{"the reservation's answer", `"code":"(QUEUED|ALREADY_RESERVED)"`},
		{"explain of that reservation", `(?m)^reservation [0-9a-f-]{36}`},
		{"explain's verdict", `(?m)^verdict: consistent`},
		{"reconcile run", `(?m)^report [0-9a-f-]{36} `},
	} {
		if !regexp.MustCompile(want.re).MatchString(text) {
			t.Errorf("%s: no line matches %s in the block's output:\n%s", want.what, want.re, text)
		}
	}
	if strings.Contains(text, "address already in use") {
		t.Errorf("two processes of the block collide on an address:\n%s", text)
	}
}

// readmeBlock returns the first ```sh block after heading in the file.
func readmeBlock(t *testing.T, path, heading string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("%s has no %q", path, heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("no ```sh block after %q", heading)
	}
	s = s[start+len("```sh\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatalf("the block after %q does not end", heading)
	}
	return s[:end]
}
