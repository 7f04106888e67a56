package inventory

import (
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
)

// Store runs the inventory transitions that stand alone (not inside another
// package's transaction): compensation, overdue rejection, reads, and the
// Redis projections of PostgreSQL's decisions.
type Store struct {
	pool *pgxpool.Pool
	rdb  redis.Cmdable
	fp   *failpoint.Set
	log  *slog.Logger
	m    *metrics.Saga
	// terminalTTL keeps terminal Redis keys (reservation, markers) for
	// replay, payment and audit windows.
	terminalTTL time.Duration
}

// Deps are a Store's dependencies.
type Deps struct {
	Pool        *pgxpool.Pool
	Redis       redis.Cmdable
	Failpoints  *failpoint.Set // may be nil
	Log         *slog.Logger
	Metrics     *metrics.Saga // may be nil: a private registry is used
	TerminalTTL time.Duration
}

// TerminalTTL is how long terminal Redis keys and markers are kept (the
// reservation TTL, which the rebalancer's transfer markers use too).
func (s *Store) TerminalTTL() time.Duration { return s.terminalTTL }

// NewStore returns a Store; Pool, Redis, Log and a positive TerminalTTL are required.
func NewStore(d Deps) (*Store, error) {
	if d.Pool == nil || d.Redis == nil || d.Log == nil || d.TerminalTTL <= 0 {
		return nil, errors.New("inventory: nil dependency or non-positive terminal TTL")
	}
	if d.Failpoints == nil {
		d.Failpoints = &failpoint.Set{}
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewSaga(prometheus.NewRegistry())
	}
	return &Store{pool: d.Pool, rdb: d.Redis, fp: d.Failpoints, log: d.Log, m: d.Metrics, terminalTTL: d.TerminalTTL}, nil
}
