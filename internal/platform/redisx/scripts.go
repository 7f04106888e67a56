package redisx

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// PipelinedScripts returns a redis.Scripter that sends EVALSHA and EVAL
// (and their _RO forms) through c's auto-pipeliner, go-redis's deferred
// face: the calls of concurrent callers go out as one pipeline, one write
// and one read on a connection, and a lone call goes out at once. SCRIPT
// EXISTS and SCRIPT LOAD go to c itself.
//
// A caller waits for its answer no longer than its context. The pipeliner
// runs a queued command on its own context (go-redis does not honour the
// caller's once the command is queued), so against a Redis that stopped
// answering a call would otherwise wait out the read timeout of every retry
// (8 s here). A call whose context ends first returns the context's error;
// its command may still run, so its outcome is unknown, as for any call whose
// answer is lost.
func PipelinedScripts(c redis.UniversalClient) (redis.Scripter, error) {
	ap, err := c.AsyncAutoPipeline()
	if err != nil {
		return nil, fmt.Errorf("redis auto-pipeliner: %w", err)
	}
	return &pipelined{c: c, ap: ap}, nil
}

type pipelined struct {
	c  redis.UniversalClient
	ap *redis.AutoPipeliner
}

func (p *pipelined) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "eval", script, keys, args)
}

func (p *pipelined) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "evalsha", sha1, keys, args)
}

func (p *pipelined) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "eval_ro", script, keys, args)
}

func (p *pipelined) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "evalsha_ro", sha1, keys, args)
}

func (p *pipelined) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.c.ScriptExists(ctx, hashes...)
}

func (p *pipelined) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.c.ScriptLoad(ctx, script)
}

// run builds the command as go-redis's own Eval does (the first key at
// position 3, which a cluster routes by) and waits for it within ctx.
func (p *pipelined) run(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, name, payload, len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	cmd := redis.NewCmd(ctx, argv...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	err := p.ap.Submit(ctx, cmd).WaitContext(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Abandoned: the queued command may still be filled in by its
		// batch, so the caller gets a command of its own.
		gone := redis.NewCmd(ctx, argv...)
		gone.SetErr(err)
		return gone
	}
	return cmd
}
