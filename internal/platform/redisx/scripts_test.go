package redisx_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/testenv"
)

// A Redis that accepts connections and never answers: a pipelined call
// returns its caller's context error, not the pipeliner's read timeout of
// every retry (go-redis runs a queued command on its own context).
func TestPipelinedScriptsHonourTheCallersContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	// No retries and a short read timeout: the pipeliner gives up soon after
	// the test, so closing the client does not wait long.
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	s, err := redisx.PipelinedScripts(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.EvalSha(ctx, "0123456789012345678901234567890123456789", []string{"k"}, "a").Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EvalSha on a silent Redis: %v, want the caller's context.DeadlineExceeded", err)
	}
}

// On the stack's Redis: concurrent calls each get their own answer, and a
// script Redis has never seen falls back from EVALSHA to EVAL (Script.Run
// on the NOSCRIPT the pipeline reports).
func TestPipelinedScriptsAnswerEachCallAndLoadUnknownScripts(t *testing.T) {
	cfg := testenv.Require(t)
	rdb := testenv.Redis(t, cfg)
	s, err := redisx.PipelinedScripts(rdb)
	if err != nil {
		t.Fatal(err)
	}
	// A body no other run has sent: its SHA is unknown to Redis.
	script := redis.NewScript(fmt.Sprintf("-- %x\nreturn KEYS[1] .. ':' .. ARGV[1]", testenv.RandomUint64()))
	ctx := context.Background()
	if ok, err := rdb.ScriptExists(ctx, script.Hash()).Result(); err != nil || slices.Contains(ok, true) {
		t.Fatalf("script exists before the test: %v %v", ok, err)
	}
	const calls = 200
	var wg sync.WaitGroup
	got := make([]any, calls)
	errs := make([]error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = script.Run(ctx, s, []string{fmt.Sprintf("{t}:%d", i)}, i).Result()
		}()
	}
	wg.Wait()
	for i := range calls {
		if want := fmt.Sprintf("{t}:%d:%d", i, i); errs[i] != nil || got[i] != want {
			t.Fatalf("call %d: %v, %v; want %q", i, got[i], errs[i], want)
		}
	}
	// On a cluster the EVAL ran on the master of the keys' slot ({t}).
	node, err := redisx.NodeFor(ctx, rdb, "{t}:0")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := node.ScriptExists(ctx, script.Hash()).Result(); err != nil || !ok[0] {
		t.Fatalf("script not in the cache of %s after the EVAL fallback: %v %v", node.Options().Addr, ok, err)
	}
}
