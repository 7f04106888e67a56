package lua_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// TestScriptsRunByEVALSHA loads the embedded reserve script and runs it by its
// SHA (no EVAL fallback), proving go:embed, SCRIPT LOAD and EVALSHA work.
func TestScriptsRunByEVALSHA(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg) // loads every script
	ctx := context.Background()
	for name, s := range lua.All() {
		exists, err := rdb.ScriptExists(ctx, s.Hash()).Result()
		if err != nil || len(exists) != 1 || !exists[0] {
			t.Fatalf("script %s not in the server's cache after load: %v %v", name, exists, err)
		}
	}
	k := lua.Keys{ActivityID: testenv.ActivityID(), SKUID: 1}
	t.Cleanup(func() { rdb.Del(ctx, k.Counter(), k.Meta()) })
	// A SKU that was never set up answers NOT_CONFIGURED (-5) and writes nothing.
	keys, argv := lua.ReserveArgs{ReservationID: "r1", MessageID: "m1", RequestID: "q1", UserID: 7, NowMS: 1000,
		KeyVersion: 1, SchemaVersion: 1, TTL: time.Minute, SendDueAtMS: 2000}.Render(k)
	res, err := rdb.EvalSha(ctx, lua.ReserveSHA(), keys, argv...).Slice()
	if err != nil {
		t.Fatalf("EVALSHA reserve: %v", err)
	}
	if code := res[0].(int64); code != int64(lua.ReserveNotConfigured) {
		t.Fatalf("reserve on an unconfigured sku = %v, want code -5", res)
	}
	if n, _ := rdb.Exists(ctx, k.Reservation("r1"), k.User(7), k.Request(7, "q1")).Result(); n != 0 {
		t.Fatalf("rejected reserve wrote %d keys", n)
	}
}
