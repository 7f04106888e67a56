// Package activities holds every Temporal activity of the sagas. Each is a
// thin adapter: it takes the Temporal view of a step (attempt, lease owner,
// metrics) and calls the store that owns the rows (internal/orders,
// internal/inventory, internal/payments, internal/repairs). The SQL lives in
// those stores, so the reconciler and the API run the same transitions.
package activities

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
)

// Activities holds the dependencies of every saga activity. Register one
// instance with the worker; workflows refer to methods through a nil
// *Activities.
type Activities struct {
	pool *pgxpool.Pool
	fp   *failpoint.Set
	log  *slog.Logger

	orders   *orders.Store
	inv      *inventory.Store
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
	if d.Metrics == nil {
		d.Metrics = metrics.NewSaga(prometheus.NewRegistry())
	}
	a := &Activities{pool: d.Pool, fp: d.Failpoints, log: d.Log, provider: d.Provider, m: d.Metrics}
	var err error
	if a.orders, err = orders.NewStore(orders.Deps{Pool: d.Pool, Verify: d.Verify, Topic: d.Topic, Failpoints: d.Failpoints,
		Log: d.Log, Metrics: d.Metrics}); err != nil {
		return nil, err
	}
	if a.inv, err = inventory.NewStore(inventory.Deps{Pool: d.Pool, Redis: d.Redis, Failpoints: d.Failpoints, Log: d.Log,
		Metrics: d.Metrics, TerminalTTL: d.TerminalTTL}); err != nil {
		return nil, err
	}
	a.pay = payments.NewStore(d.Pool, d.Failpoints)
	return a, nil
}
