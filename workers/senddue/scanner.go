// Package senddue is the send-due scanner (docs/spec.md#send-due): it re-sends
// ORDER_CREATE_REQUESTED for reservations the gateway could not confirm as
// sent, with the same message_id, claiming work by lease so that several
// scanners can run at once and a crashed one loses nothing. A claim is
// sized to its lease: at most Concurrency items, all sent at once, each
// send begun only when its whole timeout ends before the lease does (less
// internal/platform/lease's slack for recording it), so no item is still being sent
// when its lease runs out and another scanner may claim it. It never gives
// up: an unsent reservation is retried at a capped backoff for as long as it
// is RESERVED in Redis, and a published one still unsettled past its business
// deadline is re-sent now and then (reconciliation rejects it durably), or at
// once when a broker group left the topic's route (stranded.go).
package senddue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/backoff"
	"github.com/seckill/seckill/internal/platform/lease"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/poll"
	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
)

// Options of a Scanner.
type Options struct {
	Topic       string
	Interval    time.Duration // between scans when nothing was due
	Lease       time.Duration // how long a claim is ours
	Batch       int           // items handled per SKU per scan
	Concurrency int           // sends in flight, and items per claim
	// SendTimeout bounds one send; one longer than the lease allows
	// (lease.MaxTimeout) is cut to it.
	SendTimeout time.Duration
	BaseBackoff time.Duration // first retry delay; doubles per attempt
	MaxBackoff  time.Duration // the cap: an outage of any length is retried at this pace
	// RecheckAfter: a published reservation still unsettled this long after
	// its business deadline is re-sent; later rechecks back off to MaxRecheck.
	RecheckAfter time.Duration
	MaxRecheck   time.Duration
	// ActiveSKUs is the Redis set of "activity:sku" members to scan
	// (default lua.ActiveSKUs, which sale set-up fills); a test scans a set
	// of its own so that no other scanner touches its reservations.
	ActiveSKUs string
	// PruneGrace: a bucket whose sale ended this long ago and owes nothing
	// is taken out of ActiveSKUs (sale.Prune; default sale.DefaultPruneGrace),
	// looked for at most once per PruneEvery (default a minute).
	PruneGrace time.Duration
	PruneEvery time.Duration
	// Brokers, when set, names the broker groups that hold Topic's queues
	// (mq.RouteWatch); it is asked every RouteEvery (default 5 s), and a
	// group that left makes every waiting reservation due now (stranded.go).
	Brokers    func(ctx context.Context) (map[string]bool, error)
	RouteEvery time.Duration
}

// Scanner re-sends due reservations.
type Scanner struct {
	rdb    redis.Cmdable
	pub    reservation.Publisher
	opt    Options
	m      *metrics.Reservation
	log    *slog.Logger
	now    func() time.Time
	unsent unsentSet
	pruned time.Time // when ScanOnce last looked for finished buckets
}

// New returns a Scanner; every dependency is required.
func New(rdb redis.Cmdable, pub reservation.Publisher, opt Options, m *metrics.Reservation, log *slog.Logger) (*Scanner, error) {
	if rdb == nil || pub == nil || m == nil || log == nil {
		return nil, errors.New("senddue: nil dependency")
	}
	if opt.Topic == "" || opt.Lease <= 0 || opt.SendTimeout <= 0 {
		return nil, fmt.Errorf("senddue: incomplete options %+v", opt)
	}
	if opt.Interval <= 0 {
		opt.Interval = 200 * time.Millisecond
	}
	if opt.Batch <= 0 {
		opt.Batch = 100
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = 8
	}
	if opt.BaseBackoff <= 0 {
		opt.BaseBackoff = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = 30 * time.Second
	}
	if opt.RecheckAfter <= 0 {
		opt.RecheckAfter = reservation.DefaultRecheckAfter
	}
	if opt.MaxRecheck <= 0 {
		opt.MaxRecheck = time.Hour
	}
	if opt.ActiveSKUs == "" {
		opt.ActiveSKUs = lua.ActiveSKUs
	}
	if opt.PruneGrace <= 0 {
		opt.PruneGrace = sale.DefaultPruneGrace
	}
	if opt.PruneEvery <= 0 {
		opt.PruneEvery = time.Minute
	}
	if opt.RouteEvery <= 0 {
		opt.RouteEvery = 5 * time.Second
	}
	if capped, cut := lease.Cap(opt.SendTimeout, opt.Lease); cut {
		log.Warn("senddue.send_timeout_capped", "send_timeout", opt.SendTimeout.String(), "lease", opt.Lease.String(),
			"capped_to", capped.String())
		opt.SendTimeout = capped
	}
	s := &Scanner{rdb: rdb, pub: pub, opt: opt, m: m, log: log, now: time.Now}
	// An unsent item is claimed again at least every MaxBackoff + Lease by
	// some scanner; one not seen for twice that was settled elsewhere.
	s.unsent.staleAfter = 2 * (opt.MaxBackoff + opt.Lease + opt.Interval)
	return s, nil
}

// Run scans until ctx ends, again at once after a scan that handled any
// item (more may be due).
func (s *Scanner) Run(ctx context.Context) error {
	if s.opt.Brokers != nil {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.watchBrokers(wctx) }()
		defer func() { stop(); <-done }()
	}
	return poll.Run(ctx, poll.Options{Interval: s.opt.Interval, Log: s.log, FailedEvent: "senddue.scan_failed"},
		func(ctx context.Context) (bool, error) {
			n, err := s.ScanOnce(ctx)
			return n > 0, err
		})
}

// ScanOnce claims and re-sends every due item of every active SKU once and
// returns how many it handled. A SKU (bucket) it cannot scan (its Redis
// shard down, a key of the wrong type) is counted, logged and skipped: the
// others are scanned all the same, and the error (a *skuloop.Error) names
// every SKU that failed. Once per PruneEvery it also takes the finished
// buckets it found idle out of ActiveSKUs, so that no loop walks every sale
// ever set up.
func (s *Scanner) ScanOnce(ctx context.Context) (int, error) {
	members, err := s.rdb.SMembers(ctx, s.opt.ActiveSKUs).Result()
	if err != nil {
		return 0, fmt.Errorf("list active skus: %w", err)
	}
	prune := s.now().Sub(s.pruned) >= s.opt.PruneEvery
	if prune {
		s.pruned = s.now()
	}
	handled, unsettled := 0, int64(0)
	pass := skuloop.NewPass("senddue", s.m.SendDueSKUFailures, s.log, s.rdb)
	for _, member := range members {
		k, err := lua.ParseMember(member)
		if err != nil {
			s.log.Error("senddue.bad_active_sku", "member", member, "error", err)
			continue
		}
		if err := pass.Unreachable(ctx, k.SendDue()); err != nil {
			pass.Fail(k.ActivityID, k.SKUID, k.Bucket, err)
			continue
		}
		n, size, err := s.scanSKU(ctx, k)
		handled += n
		unsettled += size
		if err != nil {
			if ctx.Err() != nil {
				return handled, err
			}
			pass.Fail(k.ActivityID, k.SKUID, k.Bucket, err)
			continue
		}
		if prune && n == 0 && size == 0 {
			s.prune(ctx, k)
		}
	}
	pending, oldest := s.unsent.stats(s.now())
	s.m.SendPending.Set(float64(pending))
	s.m.SendOldestAge.Set(oldest.Seconds())
	s.m.Unsettled.Set(float64(unsettled))
	return handled, pass.Err()
}

// prune takes k out of ActiveSKUs if its sale is over (sale.Prune); a
// failure is logged and the member kept, to be looked at again next time.
func (s *Scanner) prune(ctx context.Context, k lua.Keys) {
	done, err := sale.Prune(ctx, s.rdb, s.opt.ActiveSKUs, k, s.now(), s.opt.PruneGrace)
	if err != nil {
		s.log.Warn("senddue.prune_failed", "activity_id", k.ActivityID, "sku_id", k.SKUID, "bucket", k.Bucket, "error", err)
		return
	}
	if done {
		s.m.ActiveSKUsPruned.Inc()
		s.log.Info("senddue.finished_sku_pruned", "activity_id", k.ActivityID, "sku_id", k.SKUID, "bucket", k.Bucket)
	}
}

// scanSKU handles up to Batch due items of one SKU, one claim of at most
// Concurrency items at a time: every item of a claim is sent at once, so a
// claim's work is one send timeout, inside its lease whatever the broker's
// pace.
func (s *Scanner) scanSKU(ctx context.Context, k lua.Keys) (handled int, size int64, err error) {
	size, _ = s.rdb.ZCard(ctx, k.SendDue()).Result()
	for handled < s.opt.Batch && ctx.Err() == nil {
		want := min(s.opt.Concurrency, s.opt.Batch-handled)
		n, err := s.claimAndSend(ctx, k, want)
		handled += n
		if err != nil {
			return handled, size, err
		}
		if n < want {
			break // nothing more due
		}
	}
	return handled, size, nil
}

// claimAndSend lease-claims up to max due items of k and sends them all at
// once under the claim's lease budget.
func (s *Scanner) claimAndSend(ctx context.Context, k lua.Keys, max int) (int, error) {
	budget := lease.Start(time.Now(), s.opt.Lease) // before the claim: the claim's lease ends no earlier
	now := s.now()
	claimed, err := lua.SendClaim(ctx, s.rdb, k, lua.SendClaimArgs{NowMS: now.UnixMilli(),
		LeaseUntilMS: now.Add(s.opt.Lease).UnixMilli(), Max: max})
	if err != nil {
		return 0, fmt.Errorf("claim send_due of %s: %w", k.SendDue(), err)
	}
	var wg sync.WaitGroup
	for _, c := range claimed {
		wg.Go(func() { s.resend(ctx, k, c.ReservationID, budget) })
	}
	wg.Wait()
	return len(claimed), nil
}

func (s *Scanner) resend(ctx context.Context, k lua.Keys, ridText string, budget lease.Budget) {
	rid, err := uuid.Parse(ridText)
	if err != nil {
		s.log.Error("senddue.bad_member", "member", ridText, "error", err)
		s.rdb.ZRem(ctx, k.SendDue(), ridText)
		return
	}
	f, ok := s.pending(ctx, k, rid, ridText)
	if !ok {
		return
	}
	start := time.Now()
	if !budget.Fits(start, s.opt.SendTimeout) {
		// Reading it took most of the lease (Redis slow): neither sent nor
		// counted; it is due again when the lease ends.
		s.log.Warn("senddue.lease_too_short_to_send", "reservation_id", ridText, "send_timeout", s.opt.SendTimeout.String())
		return
	}
	now := s.now()
	recheck := f.MQState == reservation.OutcomePublished && time.UnixMilli(f.DeadlineMS).Before(now)
	switch {
	case recheck:
		// Published, yet past its deadline and still unsettled: the message
		// may be lost (or its saga too); the same message_id again is harmless,
		// and reconciliation rejects it durably if nothing takes it up.
		s.m.SendRecheck.Inc()
		s.log.Warn("reservation.mq_recheck_resend", "reservation_id", ridText, "message_id", f.MessageID,
			"attempt_count", f.SendAttempts+1, "business_deadline_ms", f.DeadlineMS)
	case f.MQState == reservation.OutcomePublished:
		// Published, made due before its deadline: its broker group left the
		// route (stranded.go).
		s.log.Info("reservation.mq_stranded_resend", "reservation_id", ridText, "message_id", f.MessageID,
			"attempt_count", f.SendAttempts+1)
	default:
		s.log.Info("reservation.mq_resend_claimed", "reservation_id", ridText, "message_id", f.MessageID,
			"attempt_count", f.SendAttempts+1)
	}
	sctx, cancel := context.WithDeadline(ctx, start.Add(s.opt.SendTimeout)) // by the budget's deadline
	defer cancel()
	outcome, errText := reservation.Send(sctx, s.pub, s.opt.Topic, f)
	s.m.Resend.Inc()
	s.m.SendTotal.WithLabelValues("scanner", outcome).Inc()
	if outcome == reservation.OutcomeUnknown {
		s.m.SendUnknown.Inc()
	}
	sent := reservation.Sent{Outcome: outcome, ErrText: errText,
		NextDue: now.Add(backoff.Exponential(s.opt.BaseBackoff, s.opt.MaxBackoff, f.SendAttempts+1)),
		Recheck: reservation.RecheckAt(f.DeadlineMS, now, s.opt.RecheckAfter)}
	if recheck {
		sent.Recheck = now.Add(backoff.Exponential(s.opt.RecheckAfter, s.opt.MaxRecheck, f.SendAttempts))
	}
	state, err := reservation.MarkSent(ctx, s.rdb, k, rid, sent)
	if err != nil {
		s.log.Warn("senddue.mark_failed", "reservation_id", ridText, "error", err)
		return
	}
	switch state {
	case reservation.OutcomePublished:
		s.unsent.forget(ridText)
		if f.MQState != reservation.OutcomePublished { // its first confirmed send
			s.m.SendAttempts.Observe(float64(f.SendAttempts + 1))
		}
	case reservation.OutcomeUnknown, reservation.StatePending:
		s.unsent.see(ridText, time.UnixMilli(f.ReservedAtMS), now)
		if time.UnixMilli(f.DeadlineMS).Before(now) {
			s.log.Error("reservation.mq_send_past_deadline", "reservation_id", ridText, "message_id", f.MessageID,
				"attempt_count", f.SendAttempts+1, "error", errText)
		}
	default: // settled or missing meanwhile
		s.unsent.forget(ridText)
	}
}

// pending reads a claimed reservation and reports whether it still waits
// for its message (RESERVED in Redis). A missing hash is recorded and
// counted, a settled one is taken out of send_due.
func (s *Scanner) pending(ctx context.Context, k lua.Keys, rid uuid.UUID, ridText string) (f reservation.Fields, ok bool) {
	h, err := s.rdb.HGetAll(ctx, k.Reservation(ridText)).Result()
	if err != nil {
		return f, false // lease runs out; claimed again later
	}
	if len(h) == 0 {
		// Hash gone: recorded (counted, removed from send_due); reconciliation
		// decides from PostgreSQL. Never a silent drop.
		if _, err := reservation.MarkSent(ctx, s.rdb, k, rid, reservation.Sent{Outcome: reservation.OutcomeFailed, ErrText: "reservation hash missing"}); err == nil {
			s.unsent.forget(ridText)
			s.m.SendMissing.Inc()
			s.log.Error("reservation.mq_resend_missing", "reservation_id", ridText, "activity_id", k.ActivityID, "sku_id", k.SKUID)
		}
		return f, false
	}
	f, err = reservation.ParseFields(h)
	if err != nil {
		s.log.Error("senddue.bad_reservation", "reservation_id", ridText, "error", err)
		return f, false
	}
	if f.Status != state.ReservationReserved.String() {
		// Settled (an order projected, or the unit compensated) by a path that
		// did not take it out of send_due (a hash rebuilt by reconciliation).
		s.rdb.ZRem(ctx, k.SendDue(), ridText)
		s.unsent.forget(ridText)
		return f, false
	}
	return f, true
}

// unsentSet remembers the reservations whose last send by this scanner did
// not reach the broker, for the send-lag gauges: how many, and the age of the
// oldest since its admission (the figure an outage alert needs; the next due
// item's lateness stays near zero while the scanner retries on schedule).
type unsentSet struct {
	mu         sync.Mutex
	staleAfter time.Duration
	items      map[string]unsentItem
}

type unsentItem struct{ reservedAt, seen time.Time }

func (u *unsentSet) see(rid string, reservedAt, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.items == nil {
		u.items = map[string]unsentItem{}
	}
	u.items[rid] = unsentItem{reservedAt: reservedAt, seen: now}
}

func (u *unsentSet) forget(rid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.items, rid)
}

// stats drops items not seen for staleAfter and returns the count and the
// oldest age.
func (u *unsentSet) stats(now time.Time) (int, time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var oldest time.Duration
	for rid, it := range u.items {
		if now.Sub(it.seen) > u.staleAfter {
			delete(u.items, rid)
			continue
		}
		oldest = max(oldest, now.Sub(it.reservedAt))
	}
	return len(u.items), oldest
}
