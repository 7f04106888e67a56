package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/testenv"
)

// buildSeckill builds the real binary the cluster runs.
func buildSeckill(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "seckill")
	cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", bin, "github.com/seckill/seckill/cmd/seckill")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startCluster creates and starts the cluster of the real binary on the
// stack, its logs in a directory of the test's; the caller closes it.
func startCluster(ctx context.Context, t *testing.T, cfg config.Config) (*Cluster, string) {
	t.Helper()
	logs := t.TempDir()
	c, err := NewCluster(ctx, ClusterOptions{Bin: buildSeckill(t), Dir: logs, Config: cfg,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, logs
}

// The crash-point matrix, short form (docs/chaos.md has the soak): each of
// the ten failpoints of the matrix (failpoint.Seed) is armed in the process that checks it on its
// real path, the process SIGKILLs itself there and is restarted, and every
// sale played meanwhile must settle with I1–I7 holding, nothing open, owed
// or running. First every failpoint runs SECKILL_CRASH_RUNS times (5) with
// the crashed process back armed at once; then once each with a clean
// restart and the sale judged before the next run. SECKILL_CRASH_FAILPOINTS
// narrows it to some failpoints (chaos_env_test.go).
func TestCrashPointMatrix(t *testing.T) {
	cfg := testenv.Require(t)
	if cfg.RedisCluster() {
		t.Skip(ErrRedisCluster)
	}
	runs := envInt(t, "SECKILL_CRASH_RUNS", 5)
	fps := envList(t, "SECKILL_CRASH_FAILPOINTS", failpoint.Seed)
	want := len(fps)
	if want == 0 {
		want = len(failpoint.Seed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), envDuration(t, "SECKILL_CHAOS_TIMEOUT", 15*time.Minute))
	defer cancel()
	c, logs := startCluster(ctx, t, cfg)
	defer c.Close()
	for _, mode := range []struct {
		name     string
		runs     int
		pipeline bool
	}{{"pipelined", runs, true}, {"one by one", 1, false}} {
		var out bytes.Buffer
		rep, err := Matrix(ctx, c, MatrixOptions{Failpoints: fps, Runs: mode.runs, Pipeline: mode.pipeline, Progress: progressTo(&out)})
		rep.Print(&out)
		t.Logf("%s:\n%s", mode.name, out.String())
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		if len(rep.Rows) != want {
			t.Fatalf("%s: %d failpoints run, want %d", mode.name, len(rep.Rows), want)
		}
		for _, row := range rep.Rows {
			// Pipelined, a crash while starting (a sale in flight hit the
			// failpoint first) is a run without a sale of its own.
			if row.Crashes != mode.runs || row.Sales > mode.runs || (!mode.pipeline && row.Sales != mode.runs) {
				t.Errorf("%s: %s crashed %d times over %d sales, want %d crashes", mode.name, row.Failpoint, row.Crashes, row.Sales, mode.runs)
			}
		}
		if n := rep.Violations(); n > 0 {
			for _, name := range []string{ProcAPI, ProcSaga, ProcStarter, ProcRest} {
				b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
				t.Logf("%s log (last 4 KiB):\n%s", name, tail(b, 4096))
			}
			t.Fatalf("%s: %d violations", mode.name, n)
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
