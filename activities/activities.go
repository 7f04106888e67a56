package activities

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/payments"
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

	pay      *payments.Store
	provider payments.Provider
	m        *metrics.Saga
}

// Deps are the dependencies of Activities. Provider may be nil when only
// the order part of the saga runs (the payment activities then fail).
type Deps struct {
	Pool *pgxpool.Pool
	// Verify is a separate small pool for settling unknown commit outcomes.
	Verify      *pgxpool.Pool
	Redis       redis.Cmdable
	Failpoints  *failpoint.Set
	Log         *slog.Logger
	Topic       string
	TerminalTTL time.Duration
	Provider    payments.Provider
	// Metrics may be nil (a private registry is used).
	Metrics *metrics.Saga
}

// New returns Activities; every dependency but Failpoints and Provider is required.
func New(d Deps) (*Activities, error) {
	if d.Pool == nil || d.Verify == nil || d.Redis == nil || d.Log == nil || d.Topic == "" || d.TerminalTTL <= 0 {
		return nil, errors.New("activities: nil dependency or empty setting")
	}
	if d.Failpoints == nil {
		d.Failpoints = &failpoint.Set{}
	}
	a := &Activities{pool: d.Pool, verify: d.Verify, rdb: d.Redis, fp: d.Failpoints, log: d.Log, Topic: d.Topic,
		TerminalTTL: d.TerminalTTL, provider: d.Provider}
	a.pay = payments.NewStore(d.Pool, d.Failpoints)
	a.m = d.Metrics
	if a.m == nil {
		a.m = metrics.NewSaga(prometheus.NewRegistry())
	}
	return a, nil
}
