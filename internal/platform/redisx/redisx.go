// Package redisx opens the Redis client, a single Redis or a Redis Cluster,
// and loads the project's Lua scripts.
//
// Every process holds a redis.UniversalClient: a *redis.Client on the single
// Redis, a *redis.ClusterClient on a cluster (SECKILL_REDIS_CLUSTER_ADDRS).
// What the project sends is cluster-safe: each Lua script and each MULTI
// touches the keys of one (activity, sku), which share a hash tag and so one
// slot (package lua); plain pipelines may mix slots (the cluster client
// splits them by node); lua.ActiveSKUs is read and written on its own.
// Commands that walk the keyspace (SCAN, KEYS, FLUSHDB, INFO) reach only one
// node of a cluster: run them through ForEachMaster.
package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/lua"
)

// Timeouts of every client, single or cluster. Every client also honours
// its caller's context deadline on the socket (ContextTimeoutEnabled): a
// request's budget, not the read timeout times go-redis's retries, bounds
// how long a Redis that stopped answering holds it.
const (
	dialTimeout  = 2 * time.Second
	readTimeout  = time.Second
	writeTimeout = time.Second
)

// Dial opens the Redis of cfg: the cluster of SECKILL_REDIS_CLUSTER_ADDRS
// when set, else the single Redis at SECKILL_REDIS_ADDR on database
// SECKILL_REDIS_DB. poolSize is per node. The scripts are loaded (on every
// node of a cluster) so EVALSHA hits from the start.
func Dial(ctx context.Context, cfg config.Config, poolSize int) (redis.UniversalClient, error) {
	a, err := authOf(cfg)
	if err != nil {
		return nil, err
	}
	if !cfg.RedisCluster() {
		return openDB(ctx, cfg.RedisAddr, cfg.RedisDB, poolSize, a)
	}
	return openCluster(ctx, cfg.RedisClusterAddrs, poolSize, a)
}

// OpenDB connects to the single Redis of cfg (its address, credentials and
// TLS) on logical database db rather than cfg's, checks it answers and loads
// every script of package lua into its script cache so EVALSHA hits from the
// start.
func OpenDB(ctx context.Context, cfg config.Config, db, poolSize int) (*redis.Client, error) {
	a, err := authOf(cfg)
	if err != nil {
		return nil, err
	}
	return openDB(ctx, cfg.RedisAddr, db, poolSize, a)
}

func openDB(ctx context.Context, addr string, db, poolSize int, a auth) (*redis.Client, error) {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		Username:     a.username,
		Password:     a.password,
		TLSConfig:    a.tls,
		DB:           db,
		PoolSize:     poolSize,
		DialTimeout:  dialTimeout,
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,

		ContextTimeoutEnabled: true,
	})
	if err := ready(ctx, c, addr); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func openCluster(ctx context.Context, seeds []string, poolSize int, a auth) (*redis.ClusterClient, error) {
	addrs := make([]string, 0, len(seeds))
	for _, s := range seeds {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("redis cluster: no seed address")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        addrs,
		Username:     a.username,
		Password:     a.password,
		TLSConfig:    a.tls,
		PoolSize:     poolSize,
		DialTimeout:  dialTimeout,
		ReadTimeout:  readTimeout,
		WriteTimeout: writeTimeout,

		ContextTimeoutEnabled:      true,
		ClusterStateReloadInterval: clusterStateReload,
	})
	c.AddHook(rerouteOnUnreachable{c})
	where := "cluster " + strings.Join(addrs, ",")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := c.ForEachMaster(pctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", m.Options().Addr, err)
		}
		return nil
	})
	if err == nil {
		err = ready(ctx, c, where)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ping redis %s: %w", where, err)
	}
	return c, nil
}

// ready pings c and loads the scripts.
func ready(ctx context.Context, c redis.UniversalClient, where string) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("ping redis at %s: %w", where, err)
	}
	return LoadScripts(pctx, c)
}

// LoadScripts runs SCRIPT LOAD for every script of package lua. On a
// *redis.ClusterClient, go-redis sends SCRIPT LOAD to every node (masters and
// replicas) and fails if one fails. A master that joins later has none: the
// scripts' first EVALSHA there answers NOSCRIPT and go-redis runs EVAL
// (redis.Script.Run), which caches them.
func LoadScripts(ctx context.Context, c redis.Scripter) error {
	for name, s := range lua.All() {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("load lua script %s: %w", name, err)
		}
	}
	return nil
}

// ForEachMaster runs fn on every master of a cluster client, concurrently,
// and returns the first error; on a single Redis, once on the client itself.
// Keyspace walks (SCAN, KEYS, FLUSHDB) and per-server commands go through it.
func ForEachMaster(ctx context.Context, c redis.Cmdable, fn func(ctx context.Context, node *redis.Client) error) error {
	switch x := c.(type) {
	case *redis.ClusterClient:
		return x.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, x)
	default:
		return fmt.Errorf("redisx: unsupported client %T", c)
	}
}

// NodeFor is the node that holds key: its slot's master on a cluster, the
// client itself on a single Redis. A KEYS or SCAN of one hash tag (one SKU's
// keys) runs there.
func NodeFor(ctx context.Context, c redis.Cmdable, key string) (*redis.Client, error) {
	switch x := c.(type) {
	case *redis.ClusterClient:
		return x.MasterForKey(ctx, key)
	case *redis.Client:
		return x, nil
	default:
		return nil, fmt.Errorf("redisx: unsupported client %T", c)
	}
}
