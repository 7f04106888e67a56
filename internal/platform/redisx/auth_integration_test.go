package redisx

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/config"
)

// An ACL-protected Redis admits Dial with the application user's password
// and refuses it without credentials or with a wrong password.
func TestDialAuthenticatesToAnACLRedis(t *testing.T) {
	if os.Getenv("SECKILL_INTEGRATION") != "1" {
		t.Skip("SECKILL_INTEGRATION=1 runs it")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH")
	}
	dir := t.TempDir()
	acl := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(acl, []byte("user default off\nuser seckill on >devpassword ~seckill:* +@all -@dangerous +info +flushdb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := "127.0.0.1:16391"
	cmd := exec.Command(bin, "--port", "16391", "--bind", "127.0.0.1", "--aclfile", acl, "--save", "", "--appendonly", "no", "--dir", dir) // #nosec G204 -- test binary from PATH
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	cfg := config.Config{RedisAddr: sock, RedisUsername: "seckill", RedisPassword: "devpassword"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var c redis.UniversalClient
	for c == nil {
		if c, err = Dial(ctx, cfg, 2); err != nil && ctx.Err() != nil {
			t.Fatalf("dial with credentials: %v", err)
		}
	}
	defer c.Close()
	if err := c.Set(ctx, "seckill:probe", "1", 0).Err(); err != nil {
		t.Fatalf("SET seckill:probe as seckill: %v", err)
	}
	if err := c.Set(ctx, "other:probe", "1", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET outside ~seckill:* = %v, want NOPERM", err)
	}
	for name, bad := range map[string]config.Config{
		"no credentials": {RedisAddr: sock},
		"wrong password": {RedisAddr: sock, RedisUsername: "seckill", RedisPassword: "wrong"},
	} {
		if b, err := Dial(ctx, bad, 1); err == nil {
			_ = b.Close()
			t.Errorf("%s: Dial succeeded, want an auth error", name)
		} else if !strings.Contains(err.Error(), "NOAUTH") && !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("%s: Dial = %v, want NOAUTH or WRONGPASS", name, err)
		}
	}
}
