package failpoint

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	var nilSet *Set
	if nilSet.Check(AfterRedisReserve) != nil {
		t.Fatal("nil set fired")
	}
	s := &Set{}
	s.Arm(AfterRedisReserve, 2)
	for i := 0; i < 2; i++ {
		if err := s.Check(AfterRedisReserve); !errors.Is(err, ErrInjected) {
			t.Fatalf("firing %d: %v", i, err)
		}
	}
	if s.Check(AfterRedisReserve) != nil || s.Check(AfterOrderInsert) != nil {
		t.Fatal("fired beyond its count or unarmed name fired")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("SECKILL_FAILPOINTS", "after_redis_reserve, during_commit_response=1")
	s, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if s.Check(DuringCommitResponse) == nil || s.Check(DuringCommitResponse) != nil {
		t.Fatal("count 1 not honoured")
	}
	if s.Check(AfterRedisReserve) == nil || s.Check(AfterRedisReserve) == nil {
		t.Fatal("unlimited failpoint stopped")
	}
	t.Setenv("SECKILL_FAILPOINTS", "x=0")
	if _, err := FromEnv(); err == nil {
		t.Fatal("bad count accepted")
	}
}
