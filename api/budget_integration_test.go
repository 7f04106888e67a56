package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// A Redis that stops answering (SIGSTOP of a redis-server of the test's
// own) does not hold a client past the reserve and read budgets: each
// request is answered 503 UNAVAILABLE with Retry-After while Redis is still
// frozen, a status read of a reservation PostgreSQL does not know yet is
// not a 404, and after SIGCONT every key retried gets its true outcome.
// Whatever the frozen calls did once Redis ran them again is conserved: each
// unit is either available or held by exactly one reservation that is in
// send_due (the scanner sends it), so nothing a budget cut off is lost.
func TestReserveAndStatusAnswerWithinBudgetWhileRedisIsFrozen(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "pipelined"}[pipelined], func(t *testing.T) {
			budgetWhileRedisIsFrozen(t, pipelined)
		})
	}
}

func budgetWhileRedisIsFrozen(t *testing.T, pipelined bool) {
	red := testenv.StartPrivateRedis(t)
	const budget = 250 * time.Millisecond
	s := newStackWith(t, stackOptions{redis: red.Client, reserveBudget: budget, readBudget: budget, pipelined: pipelined})
	const stock = 10
	a := s.liveSale(skuDef{1, stock})
	keyOf := map[int64]string{1: uuid.NewString(), 2: uuid.NewString(), 3: uuid.NewString()}
	st, m := s.reserve(1, a, 1, keyOf[1])
	if st != http.StatusAccepted {
		t.Fatalf("reserve before the freeze = %d %v", st, m)
	}
	r1 := m["reservation_id"].(string)
	statusPath := reservePathOf(a, 1) + "/" + r1

	red.Freeze(t)
	frozen := true
	t.Cleanup(func() {
		if frozen {
			red.Thaw(t)
		}
	})
	// The bound is the budget plus time for the answer to be written: on a
	// Redis that stops answering go-redis would otherwise wait its read
	// timeout (1 s), on every retry.
	bound := budget + 500*time.Millisecond
	calls := []struct {
		what, method, path string
		user               int64
		key                string
	}{
		{"a new reservation", http.MethodPost, reservePathOf(a, 1), 2, keyOf[2]},
		{"a retry of an admitted one", http.MethodPost, reservePathOf(a, 1), 1, keyOf[1]},
		{"another new reservation", http.MethodPost, reservePathOf(a, 1), 3, keyOf[3]},
		{"the status of the admitted one", http.MethodGet, statusPath, 1, ""},
	}
	for _, c := range calls {
		h := hdr("Authorization", s.token(c.user))
		if c.key != "" {
			h.Set("Idempotency-Key", c.key)
		}
		start := time.Now()
		st, m, header := s.call(c.method, c.path, h, "")
		took := time.Since(start)
		if st != http.StatusServiceUnavailable || m["code"] != "UNAVAILABLE" || header.Get("Retry-After") == "" {
			t.Fatalf("%s with Redis frozen = %d %v (Retry-After %q), want 503 UNAVAILABLE with Retry-After",
				c.what, st, m, header.Get("Retry-After"))
		}
		if took > bound {
			t.Fatalf("%s with Redis frozen answered after %s, want within its budget %s (bound %s)", c.what, took, budget, bound)
		}
	}

	red.Thaw(t)
	frozen = false
	// The same keys now get their true outcome: one reservation each, the
	// one derived from the key whether or not the frozen call ran.
	for u := int64(1); u <= 3; u++ {
		st, m := s.reserve(u, a, 1, keyOf[u])
		if st != http.StatusAccepted {
			t.Fatalf("retry of user %d after the thaw = %d %v", u, st, m)
		}
		if u == 1 && m["reservation_id"] != r1 {
			t.Fatalf("retry of user 1 = %v, want the admitted %s", m["reservation_id"], r1)
		}
	}
	if st, m, _ := s.call(http.MethodGet, statusPath, hdr("Authorization", s.token(1)), ""); st != http.StatusOK || m["status"] != "QUEUED" {
		t.Fatalf("status after the thaw = %d %v, want 200 QUEUED", st, m)
	}
	ctx := context.Background()
	k := lua.Keys{ActivityID: a, SKUID: 1}
	avail, err := red.Client.HGet(ctx, k.Counter(), "available").Int64()
	if err != nil {
		t.Fatal(err)
	}
	due := red.Client.ZRange(ctx, k.SendDue(), 0, -1).Val()
	held := 0
	for u := int64(1); u <= 3; u++ {
		rid, err := red.Client.Get(ctx, k.User(u)).Result()
		if err != nil {
			t.Fatalf("user %d holds no reservation after the thaw: %v", u, err)
		}
		held++
		if red.Client.ZScore(ctx, k.SendDue(), rid).Err() != nil {
			t.Fatalf("reservation %s of user %d is not in send_due %v: its message would never be sent", rid, u, due)
		}
	}
	if avail+int64(held) != stock || len(due) != held {
		t.Fatalf("after the thaw: available %d + held %d != stock %d, or send_due %d entries for %d reservations",
			avail, held, stock, len(due), held)
	}
}
