// Package redisx opens the Redis client and loads the project's Lua scripts.
package redisx

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/lua"
)

// Open connects to the Redis at addr, checks it answers and loads every
// script of package lua into its script cache so EVALSHA hits from the start.
func Open(ctx context.Context, addr string, poolSize int) (*redis.Client, error) {
	return OpenDB(ctx, addr, 0, poolSize)
}

// OpenDB is Open on logical database db.
func OpenDB(ctx context.Context, addr string, db, poolSize int) (*redis.Client, error) {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DB:           db,
		PoolSize:     poolSize,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
	})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ping redis at %s: %w", addr, err)
	}
	if err := LoadScripts(pctx, c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// LoadScripts runs SCRIPT LOAD for every script of package lua.
func LoadScripts(ctx context.Context, c redis.Scripter) error {
	for name, s := range lua.All() {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("load lua script %s: %w", name, err)
		}
	}
	return nil
}
