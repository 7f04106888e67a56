package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
)

// Several processes at once (docs/chaos.md): two gateways and two of each
// worker process on one stack, a paced burst spread over both gateways with
// duplicate requests (the same Idempotency-Key, some to the other gateway),
// replica 1 of each process SIGKILLed mid-burst, each at an awaited
// condition, and left down. The survivors must converge the sale with
// I1–I7 holding, every admitted reservation an order or compensated once,
// one inbox row per message, one saga per reservation, every outbox event
// sent once, and must be seen taking over the killed replicas' work.
// SECKILL_MULTI_USERS sets the buyers (default 80).
func TestTwoOfEachSurviveKills(t *testing.T) {
	cfg := testenv.Require(t)
	users := 80
	if v, err := strconv.Atoi(os.Getenv("SECKILL_MULTI_USERS")); err == nil && v > 0 {
		users = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logs := t.TempDir()
	c, err := NewCluster(ctx, ClusterOptions{Bin: buildSeckill(t), Dir: logs, Config: cfg, Kind: KindMulti,
		Replicas: 2, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("2 of each started and consuming in %s", time.Since(began).Round(100*time.Millisecond))
	var out bytes.Buffer
	rep, err := Multi(ctx, c, MultiOptions{Users: users, Progress: &out})
	t.Logf("multi:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.Kills {
		if !k.Condition || !k.MidBurst && k.Proc == ReplicaName(ProcAPI, 0, 2) {
			t.Errorf("kill of %s after %q: condition held %v, mid-burst %v", k.Proc, k.When, k.Condition, k.MidBurst)
		}
	}
	if len(rep.Kills) != 4 {
		t.Errorf("%d kills, want one of each of the 4 processes", len(rep.Kills))
	}
	left, err := c.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range append(rep.Violations, left...) {
		t.Errorf("VIOLATION %s", v)
	}
	if t.Failed() {
		for name := range c.Procs {
			b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
			t.Logf("%s log (last 3 KiB):\n%s", name, tail(b, 3072))
		}
	}
	t.Logf("%d requests, %d admitted, whole run %s", rep.Requests, rep.Admitted, time.Since(began).Round(time.Second))
}
