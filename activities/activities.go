package activities

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/failpoint"
)

// OrderConsumerGroup is the consumer_inbox group of CreateOrder: the order
// service's idempotency record for ORDER_CREATE_REQUESTED.
const OrderConsumerGroup = "order-create"

// Activities holds the dependencies of every saga activity. Register one
// instance with the worker; workflows refer to methods through a nil
// *Activities.
type Activities struct {
	pool *pgxpool.Pool
	// verify is a separate pool used to resolve an unknown commit outcome on
	// a fresh connection (seed §9.8).
	verify *pgxpool.Pool
	rdb    redis.Cmdable
	fp     *failpoint.Set
	log    *slog.Logger
	// TerminalTTL keeps terminal Redis keys (reservation, markers) for
	// replay, payment and audit windows.
	TerminalTTL time.Duration
	// Topic is where ORDER_CREATE_REQUESTED arrived from (recorded in the inbox).
	Topic string
}

// New returns Activities; every dependency but fp is required.
func New(pool, verify *pgxpool.Pool, rdb redis.Cmdable, fp *failpoint.Set, log *slog.Logger, topic string, terminalTTL time.Duration) (*Activities, error) {
	if pool == nil || verify == nil || rdb == nil || log == nil || topic == "" || terminalTTL <= 0 {
		return nil, errors.New("activities: nil dependency or empty setting")
	}
	if fp == nil {
		fp = &failpoint.Set{}
	}
	return &Activities{pool: pool, verify: verify, rdb: rdb, fp: fp, log: log, Topic: topic, TerminalTTL: terminalTTL}, nil
}
