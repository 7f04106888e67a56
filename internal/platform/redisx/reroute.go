package redisx

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterStateReload bounds how long a cluster client may route by an old
// slot map when no error tells it the map changed (go-redis: 60 s).
const clusterStateReload = 5 * time.Second

// rerouteOnUnreachable makes a cluster client read the slot map again
// (CLUSTER SLOTS, coalesced by go-redis) when a command fails because its
// node could not be reached. A master that died answers no MOVED, so
// without this the client keeps sending its slots to the dead address
// until its reload interval, long after a replica took over (measured: 50 s
// of refused reservations on the local cluster, e2e
// TestRedisClusterMasterFailover).
type rerouteOnUnreachable struct{ c *redis.ClusterClient }

func (h rerouteOnUnreachable) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h rerouteOnUnreachable) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(err)
		return err
	}
}

func (h rerouteOnUnreachable) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(err)
		return err
	}
}

func (h rerouteOnUnreachable) check(err error) {
	if unreachable(err) {
		h.c.ReloadState(context.Background())
	}
}

// unreachable: err says the node was not reached or did not answer in time
// (a refused or timed-out connection), not that Redis answered an error.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}
