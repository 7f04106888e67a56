package redisx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/testenv"
)

// The stack's Redis (single or cluster, whichever the tests run on) asks
// for the password: a client without it, or with another, is refused, and
// the configured one is admitted.
func TestTheStackRedisRefusesAClientWithoutItsPassword(t *testing.T) {
	cfg := testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ok, err := redisx.Dial(ctx, cfg, 1)
	if err != nil {
		t.Fatalf("dial with SECKILL_REDIS_PASSWORD: %v", err)
	}
	_ = ok.Close()
	for name, mutate := range map[string]func(*config.Config){
		"no password":    func(c *config.Config) { c.RedisPassword = "" },
		"wrong password": func(c *config.Config) { c.RedisPassword += "-not-it" },
	} {
		bad := cfg
		mutate(&bad)
		if c, err := redisx.Dial(ctx, bad, 1); err == nil {
			_ = c.Close()
			t.Errorf("%s: Dial succeeded, want NOAUTH or WRONGPASS", name)
		} else if !strings.Contains(err.Error(), "NOAUTH") && !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("%s: Dial = %v, want NOAUTH or WRONGPASS", name, err)
		}
	}
}
