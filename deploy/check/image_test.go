package check

import (
	"os"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// The production services run the Dockerfile's last stage, which holds the
// production binary alone (cmd/seckill); the payment provider simulator, a
// development command, runs the stage dev (cmd/seckill-dev).
func TestComposeRunsTheProductionImageButForPaysim(t *testing.T) {
	f := load(t)
	for _, name := range []string{"seckill-migrate", "seckill-api", "seckill-worker"} {
		if target := buildTarget(f.Services[name].Build); target != "" {
			t.Errorf("service %s builds target %q, want the Dockerfile's last stage (the production image)", name, target)
		}
	}
	if target := buildTarget(f.Services["paysim"].Build); target != "dev" {
		t.Errorf("service paysim builds target %q, want dev (seckill-dev paysim)", target)
	}
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := strings.Split(string(raw), "\nFROM ")
	last := stages[len(stages)-1]
	if !strings.Contains(last, "/out/seckill /seckill") || strings.Contains(last, "seckill-dev") {
		t.Errorf("the Dockerfile's last stage is not the production binary alone:\nFROM %s", last)
	}
	if !strings.Contains(string(raw), " AS dev\n") {
		t.Error("the Dockerfile has no stage dev")
	}
}

// buildTarget is the target of a compose build entry ("" for the last stage).
func buildTarget(b *types.BuildConfig) string {
	if b == nil {
		return "<no build>"
	}
	return b.Target
}
