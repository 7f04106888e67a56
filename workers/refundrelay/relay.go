// Package refundrelay works off refund obligations: every payment that landed
// on a cancelled order carries a refund_task written in the transaction that
// recorded it (internal/payments). The relay claims due tasks by pushing their
// next attempt forward (a lease: FOR UPDATE SKIP LOCKED, several relays may
// run), starts the payment's RefundWorkflow with its fixed ID, and looks at
// the task again until FinishRefund marks it DONE, so a refund whose start
// failed (Temporal down, a crash) or whose workflow was lost is started again.
// The starts fit the lease: each is bounded by StartTimeout and begun only
// when it ends before the lease does (less internal/platform/lease's slack); the
// tasks a slow Temporal left unstarted are handed back, their attempt not
// counted. So no task is started by two relays at once, and attempt_count
// counts starts begun (and a crashed relay's claim). The tasks' SQL is
// internal/payments's (refundtask.go), the table's owner.
package refundrelay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/backoff"
	"github.com/seckill/seckill/internal/platform/lease"
	"github.com/seckill/seckill/internal/platform/poll"
	"github.com/seckill/seckill/workflows"
)

// Options of a Relay.
type Options struct {
	TaskQueue string
	Interval  time.Duration // between polls when nothing was due
	Batch     int
	// Recheck is when a started refund is looked at again if it is not done;
	// it is also the claim's lease.
	Recheck     time.Duration
	BaseBackoff time.Duration // after a failed start; doubles, capped at MaxBackoff
	MaxBackoff  time.Duration
	// StartTimeout bounds one workflow start (default 10 s); one longer than
	// the lease allows (lease.MaxTimeout of Recheck) is cut to it.
	StartTimeout time.Duration
}

// Relay starts refunds until they are done.
type Relay struct {
	store *payments.Store
	tc    workflows.Starter
	opt   Options
	log   *slog.Logger

	started *prometheus.CounterVec
	pending prometheus.Gauge
	oldest  prometheus.Gauge
}

// New returns a Relay; every dependency is required.
func New(pool *pgxpool.Pool, tc workflows.Starter, opt Options, reg prometheus.Registerer, log *slog.Logger) (*Relay, error) {
	if pool == nil || tc == nil || reg == nil || log == nil || opt.TaskQueue == "" {
		return nil, errors.New("refundrelay: nil dependency or empty task queue")
	}
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	if opt.Batch <= 0 {
		opt.Batch = 50
	}
	if opt.Recheck <= 0 {
		opt.Recheck = 10 * time.Minute
	}
	if opt.BaseBackoff <= 0 {
		opt.BaseBackoff = 2 * time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = time.Minute
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = 10 * time.Second
	}
	if capped, cut := lease.Cap(opt.StartTimeout, opt.Recheck); cut {
		log.Warn("refund.start_timeout_capped", "start_timeout", opt.StartTimeout.String(), "recheck", opt.Recheck.String(),
			"capped_to", capped.String())
		opt.StartTimeout = capped
	}
	f := promauto.With(reg)
	return &Relay{store: payments.NewStore(pool, nil), tc: tc, opt: opt, log: log,
		started: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_refund_start_total",
			Help: "Refund workflow starts by the refund relay, by result (started, failed)."}, []string{"result"}),
		pending: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_refund_pending",
			Help: "Refund obligations not done yet (refund_task not DONE)."}),
		oldest: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_refund_oldest_age_seconds",
			Help: "Age of the oldest refund obligation not done yet (0: none)."}),
	}, nil
}

// Run relays until ctx ends, again at once after a full batch (more may be due).
func (r *Relay) Run(ctx context.Context) error {
	return poll.Run(ctx, poll.Options{Interval: r.opt.Interval, Log: r.log, FailedEvent: "refundrelay.poll_failed"},
		func(ctx context.Context) (bool, error) {
			n, err := r.Once(ctx)
			return n == r.opt.Batch, err
		})
}

// Once claims the due refund tasks, starts the workflows its lease covers,
// hands back the rest and returns how many it claimed.
func (r *Relay) Once(ctx context.Context) (int, error) {
	r.gauges(ctx)
	budget := lease.Start(time.Now(), r.opt.Recheck) // before the claim: its lease ends no earlier
	tasks, err := r.store.ClaimRefunds(ctx, r.opt.Batch, r.opt.Recheck)
	if err != nil {
		return 0, err
	}
	for i, t := range tasks {
		start := time.Now()
		if ctx.Err() != nil || !budget.Fits(start, r.opt.StartTimeout) {
			r.handBack(ctx, tasks[i:])
			break
		}
		sctx, cancel := context.WithDeadline(ctx, start.Add(r.opt.StartTimeout))
		r.start(ctx, sctx, t)
		cancel()
	}
	return len(tasks), nil
}

// handBack makes claimed tasks whose start was not begun due again at once,
// their attempt not counted. Should it fail, the tasks come back when the
// lease ends.
func (r *Relay) handBack(ctx context.Context, rest []payments.RefundTask) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease.Slack(r.opt.Recheck))
	defer cancel()
	if err := r.store.HandBackRefunds(ctx, rest); err != nil {
		r.log.Warn("refund.hand_back_failed", "tasks", len(rest), "error", err)
	}
}

// start starts t's refund within sctx (its lease) and records the outcome with ctx.
func (r *Relay) start(ctx, sctx context.Context, t payments.RefundTask) {
	err := workflows.StartRefund(sctx, r.tc, r.opt.TaskQueue, workflows.RefundInput{PaymentID: t.PaymentID, ActivityID: t.ActivityID, SKUID: t.SKUID})
	if err != nil {
		r.started.WithLabelValues("failed").Inc()
		retry := backoff.Exponential(r.opt.BaseBackoff, r.opt.MaxBackoff, t.Attempts)
		r.log.Warn("refund.start_failed", "payment_id", t.PaymentID, "attempt_count", t.Attempts, "retry_in", retry, "error", err)
		if uerr := r.store.RefundStartFailed(ctx, t.PaymentID, retry, err.Error()); uerr != nil {
			r.log.Warn("refund.task_update_failed", "payment_id", t.PaymentID, "error", uerr)
		}
		return
	}
	r.started.WithLabelValues("started").Inc()
	r.log.Info("refund.started", "payment_id", t.PaymentID, "attempt_count", t.Attempts)
	if err := r.store.RefundStarted(ctx, t.PaymentID); err != nil {
		r.log.Warn("refund.task_update_failed", "payment_id", t.PaymentID, "error", err)
	}
}

func (r *Relay) gauges(ctx context.Context) {
	if n, oldest, err := r.store.RefundBacklog(ctx); err == nil {
		r.pending.Set(float64(n))
		r.oldest.Set(oldest.Seconds())
	}
}
