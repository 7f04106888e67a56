package app

import (
	"fmt"
	"testing"

	"github.com/seckill/seckill/internal/platform/config"
)

// TestMetricsAddrDefaultsNeverCollide: the gateway, a worker of every part
// and a worker of any other set of parts each get an address of their own
// by default; SECKILL_METRICS_ADDR, when set, wins.
func TestMetricsAddrDefaultsNeverCollide(t *testing.T) {
	seen := map[string]string{MetricsAddr(config.Config{}, nil): "gateway"}
	for set := 1; set < 1<<len(AllParts); set++ {
		var parts []string
		for i, p := range AllParts {
			if set&(1<<i) != 0 {
				parts = append(parts, p)
			}
		}
		addr := MetricsAddr(config.Config{}, parts)
		if other, ok := seen[addr]; ok {
			t.Fatalf("worker %v and %s both default to %s", parts, other, addr)
		}
		seen[addr] = fmt.Sprint("worker ", parts)
	}
	if got := MetricsAddr(config.Config{}, AllParts); got != WorkerMetricsAddr {
		t.Fatalf("worker of every part on %s, want %s", got, WorkerMetricsAddr)
	}
	if got := MetricsAddr(config.Config{MetricsAddr: "127.0.0.1:1"}, []string{PartSaga}); got != "127.0.0.1:1" {
		t.Fatalf("SECKILL_METRICS_ADDR ignored: %s", got)
	}
}
