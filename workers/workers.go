// Package workers is seckill's background processes, one folder each:
// senddue (re-sends what the gateway could not), sagastarter (starts a saga
// per ORDER_CREATE_REQUESTED), sagaworker (runs the sagas' workflows and
// activities), outboxrelay, refundrelay, deadletter and reconciler (the
// Schedule). Each part starts with Run(ctx, Deps) and returns when ctx ends,
// so the composition root (app.RunWorkers) is a table of parts.
package workers

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
)

// Deps is what every part is built from: the process's configuration,
// connections, metrics and logger.
type Deps struct {
	Config config.Config
	Pool   *pgxpool.Pool
	// Verify is a small separate pool for settling unknown commit outcomes.
	Verify   *pgxpool.Pool
	Redis    redis.UniversalClient
	Producer *mq.Producer
	// Temporal is nil unless dialled (the starter, saga and refunds parts need it).
	Temporal client.Client
	// SagaWorker, when set, is the client the saga part's versioned worker
	// polls with (temporalx.Detached: no eager start from Temporal's users).
	SagaWorker client.Client
	Provider   payments.Provider
	// IDs re-derives the business IDs of arriving messages (the starter
	// quarantines a message whose IDs it did not mint).
	IDs *ids.Deriver

	Registry    prometheus.Registerer
	Reservation *metrics.Reservation
	Saga        *metrics.Saga
	Reconcile   *metrics.Reconcile

	Failpoints *failpoint.Set // may be nil
	Log        *slog.Logger
}
