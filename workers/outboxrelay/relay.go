// Package outboxrelay publishes event_outbox rows to RocketMQ
// (docs/spec.md#outbox): claim a batch by lease in a short transaction (FOR UPDATE SKIP
// LOCKED), send outside any transaction with the fixed event_id, then mark
// SENT, or RETRY with exponential backoff, or MANUAL after bounded attempts.
// The sends fit the lease: one is begun only when its whole timeout ends
// before the lease does (less internal/platform/lease's slack for recording it); the
// rows a slow broker left unstarted are handed back, their attempt not
// counted, for the next claim (this relay's or another's). So a row's
// attempt_count counts sends begun, and only a crashed relay's lease
// expires; such a row is claimed again, counting the dead claim as an
// attempt (it may have sent). Downstream consumers dedupe by event_id with
// their own inbox rows. The rows' SQL is internal/outbox's (relay.go), the
// table's owner.
package outboxrelay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/platform/backoff"
	"github.com/seckill/seckill/internal/platform/lease"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/poll"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/state"
)

// Options of a Relay.
type Options struct {
	Topic    string
	Owner    string // lease owner name; unique per relay process
	Batch    int
	Lease    time.Duration
	Interval time.Duration
	// SendTimeout bounds one send; one longer than the lease allows
	// (lease.MaxTimeout) is cut to it.
	SendTimeout time.Duration
	MaxAttempts int // then MANUAL
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

// Relay moves outbox rows to the broker.
type Relay struct {
	pool *pgxpool.Pool
	pub  reservation.Publisher
	opt  Options
	log  *slog.Logger

	sent    *prometheus.CounterVec
	pending prometheus.Gauge
	oldest  prometheus.Gauge
	expired prometheus.Counter
}

// New returns a Relay; every dependency is required.
func New(pool *pgxpool.Pool, pub reservation.Publisher, opt Options, reg prometheus.Registerer, log *slog.Logger) (*Relay, error) {
	if pool == nil || pub == nil || reg == nil || log == nil || opt.Topic == "" {
		return nil, errors.New("outboxrelay: nil dependency or empty topic")
	}
	if opt.Owner == "" {
		opt.Owner = "relay-" + uuid.NewString()[:8]
	}
	if opt.Batch <= 0 {
		opt.Batch = 100
	}
	if opt.Lease <= 0 {
		opt.Lease = 30 * time.Second
	}
	if opt.Interval <= 0 {
		opt.Interval = 200 * time.Millisecond
	}
	if opt.SendTimeout <= 0 {
		opt.SendTimeout = 3 * time.Second
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 12
	}
	if opt.BaseBackoff <= 0 {
		opt.BaseBackoff = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 5 * time.Minute
	}
	if capped, cut := lease.Cap(opt.SendTimeout, opt.Lease); cut {
		log.Warn("outbox.send_timeout_capped", "send_timeout", opt.SendTimeout.String(), "lease", opt.Lease.String(),
			"capped_to", capped.String())
		opt.SendTimeout = capped
	}
	f := promauto.With(reg)
	return &Relay{pool: pool, pub: pub, opt: opt, log: log,
		sent: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_outbox_send_total",
			Help: "Outbox sends by result (sent, retry, manual)."}, []string{"result"}),
		pending: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_outbox_pending", Help: "Outbox rows not yet sent."}),
		oldest: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_outbox_oldest_age_seconds",
			Help: "Age of the oldest unsent outbox row."}),
		expired: f.NewCounter(prometheus.CounterOpts{Name: "seckill_outbox_lease_expired_total",
			Help: "Outbox rows reclaimed after another relay's lease expired."}),
	}, nil
}

// Run relays until ctx ends, again at once after a full batch.
func (r *Relay) Run(ctx context.Context) error {
	return poll.Run(ctx, poll.Options{Interval: r.opt.Interval, Log: r.log, FailedEvent: "outbox.relay_failed"},
		func(ctx context.Context) (bool, error) {
			n, err := r.RelayOnce(ctx)
			return n == r.opt.Batch, err
		})
}

// RelayOnce claims one batch, sends what its lease covers, records the
// outcomes and hands back the rest. It returns how many rows it claimed.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	budget := lease.Start(time.Now(), r.opt.Lease) // before the claim: its lease_until is no earlier
	batch, err := outbox.Claim(ctx, r.pool, r.opt.Batch, r.opt.Owner, r.opt.Lease)
	if err != nil {
		return 0, err
	}
	for _, c := range batch {
		if c.Reclaim {
			r.expired.Inc()
			r.log.Warn("outbox.lease_expired_reclaimed", "outbox_event_id", c.EventID, "attempt_count", c.Attempts)
		}
	}
	for i, c := range batch {
		start := time.Now()
		if ctx.Err() != nil || !budget.Fits(start, r.opt.SendTimeout) {
			r.handBack(ctx, batch[i:])
			break
		}
		r.send(ctx, c, start.Add(r.opt.SendTimeout))
	}
	r.observe(ctx)
	return len(batch), nil
}

// handBack returns claimed rows whose send was not begun (what is left of
// the lease cannot cover one, or the relay stops): the claim's attempt is
// taken back and the rows are due at once, for any relay. Should it fail,
// the rows come back when the lease ends, as a crashed relay's do.
func (r *Relay) handBack(ctx context.Context, rest []outbox.Claimed) {
	ids := make([]uuid.UUID, len(rest))
	for i, c := range rest {
		ids[i] = c.EventID
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.Slack(r.opt.Lease))
	defer cancel()
	n, err := outbox.HandBack(ctx, r.pool, r.opt.Owner, ids)
	if err != nil {
		r.log.Warn("outbox.hand_back_failed", "rows", len(ids), "error", err)
		return
	}
	r.log.Info("outbox.handed_back", "rows", n, "send_timeout", r.opt.SendTimeout.String(),
		"lease", r.opt.Lease.String())
}

// send sends c, done by sendBy (within its lease), and records the outcome.
func (r *Relay) send(ctx context.Context, c outbox.Claimed, sendBy time.Time) {
	sctx, cancel := context.WithDeadline(ctx, sendBy)
	_, err := r.pub.Send(sctx, mq.Message{Topic: r.opt.Topic, Key: c.Key, Tag: c.Type, ID: c.EventID.String(), Body: c.Payload})
	cancel()
	if err == nil {
		if err := outbox.MarkSent(ctx, r.pool, r.opt.Owner, c.EventID); err != nil {
			r.log.Warn("outbox.mark_sent_failed", "outbox_event_id", c.EventID, "error", err) // re-sent after the lease: harmless
		}
		r.sent.WithLabelValues("sent").Inc()
		return
	}
	if errors.Is(err, mq.ErrSendUnknown) {
		r.log.Warn("outbox.send_unknown", "outbox_event_id", c.EventID, "attempt_count", c.Attempts, "error", err)
	}
	status, result := state.OutboxRetry, "retry"
	if c.Attempts >= r.opt.MaxAttempts {
		status, result = state.OutboxManual, "manual"
		r.log.Error("outbox.manual", "outbox_event_id", c.EventID, "event_type", c.Type, "attempt_count", c.Attempts, "error", err)
	}
	if uerr := outbox.MarkFailed(ctx, r.pool, r.opt.Owner, c.EventID, status, r.Backoff(c.Attempts), err.Error()); uerr != nil {
		r.log.Warn("outbox.mark_retry_failed", "outbox_event_id", c.EventID, "error", uerr)
	}
	r.sent.WithLabelValues(result).Inc()
}

// Backoff is BaseBackoff·2^(attempt-1), capped at MaxBackoff.
func (r *Relay) Backoff(attempt int) time.Duration {
	return backoff.Exponential(r.opt.BaseBackoff, r.opt.MaxBackoff, attempt)
}

func (r *Relay) observe(ctx context.Context) {
	if n, oldest, err := outbox.Backlog(ctx, r.pool); err == nil {
		r.pending.Set(float64(n))
		r.oldest.Set(oldest.Seconds())
	}
}
