// Package senddue is the send-due scanner (seed §7.2, §10.2): it re-sends
// ORDER_CREATE_REQUESTED for reservations the gateway could not confirm as
// sent, with the same message_id, claiming work by lease so that several
// scanners can run at once and a crashed one loses nothing.
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

	"github.com/seckill/seckill/internal/metrics"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/lua"
)

// Options of a Scanner.
type Options struct {
	Topic       string
	Interval    time.Duration // between scans when nothing was due
	Lease       time.Duration // how long a claim is ours
	Batch       int           // items claimed per SKU per scan
	Concurrency int           // sends in flight
	SendTimeout time.Duration
	MaxAttempts int
	BaseBackoff time.Duration // first retry delay; doubles per attempt
	MaxBackoff  time.Duration
}

// Scanner re-sends due reservations.
type Scanner struct {
	rdb redis.Cmdable
	pub reservation.Publisher
	opt Options
	m   *metrics.Reservation
	log *slog.Logger
	now func() time.Time
}

// New returns a Scanner; every dependency is required.
func New(rdb redis.Cmdable, pub reservation.Publisher, opt Options, m *metrics.Reservation, log *slog.Logger) (*Scanner, error) {
	if rdb == nil || pub == nil || m == nil || log == nil {
		return nil, errors.New("senddue: nil dependency")
	}
	if opt.Topic == "" || opt.Lease <= 0 || opt.SendTimeout <= 0 || opt.MaxAttempts <= 0 {
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
		opt.MaxBackoff = time.Minute
	}
	return &Scanner{rdb: rdb, pub: pub, opt: opt, m: m, log: log, now: time.Now}, nil
}

// Run scans until ctx ends.
func (s *Scanner) Run(ctx context.Context) error {
	t := time.NewTicker(s.opt.Interval)
	defer t.Stop()
	for {
		n, err := s.ScanOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("senddue.scan_failed", "error", err)
		}
		if n > 0 {
			continue // more may be due: scan again at once
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ScanOnce claims and re-sends every due item of every active SKU once and
// returns how many it handled.
func (s *Scanner) ScanOnce(ctx context.Context) (int, error) {
	members, err := s.rdb.SMembers(ctx, lua.ActiveSKUs).Result()
	if err != nil {
		return 0, fmt.Errorf("list active skus: %w", err)
	}
	handled, pending := 0, int64(0)
	oldest := time.Duration(0)
	for _, member := range members {
		k, err := reservation.SKUKey(member)
		if err != nil {
			s.log.Error("senddue.bad_active_sku", "member", member, "error", err)
			continue
		}
		n, size, age, err := s.scanSKU(ctx, k)
		handled += n
		pending += size
		oldest = max(oldest, age)
		if err != nil {
			return handled, err
		}
	}
	s.m.SendPending.Set(float64(pending))
	s.m.SendOldestAge.Set(oldest.Seconds())
	return handled, nil
}

func (s *Scanner) scanSKU(ctx context.Context, k lua.Keys) (handled int, size int64, oldestDue time.Duration, err error) {
	now := s.now()
	if first, err := s.rdb.ZRangeWithScores(ctx, k.SendDue(), 0, 0).Result(); err == nil && len(first) == 1 {
		if due := time.UnixMilli(int64(first[0].Score)); due.Before(now) {
			oldestDue = now.Sub(due)
		}
	}
	size, _ = s.rdb.ZCard(ctx, k.SendDue()).Result()
	claimed, err := lua.SendClaim.Run(ctx, s.rdb, []string{k.SendDue()},
		now.UnixMilli(), now.Add(s.opt.Lease).UnixMilli(), s.opt.Batch).StringSlice()
	if err != nil {
		return 0, size, oldestDue, fmt.Errorf("claim send_due of %s: %w", k.SendDue(), err)
	}
	sem := make(chan struct{}, s.opt.Concurrency)
	var wg sync.WaitGroup
	for i := 0; i+1 < len(claimed); i += 2 {
		rid := claimed[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.resend(ctx, k, rid)
		}()
	}
	wg.Wait()
	return len(claimed) / 2, size, oldestDue, nil
}

func (s *Scanner) resend(ctx context.Context, k lua.Keys, ridText string) {
	rid, err := uuid.Parse(ridText)
	if err != nil {
		s.log.Error("senddue.bad_member", "member", ridText, "error", err)
		s.rdb.ZRem(ctx, k.SendDue(), ridText)
		return
	}
	h, err := s.rdb.HGetAll(ctx, k.Reservation(ridText)).Result()
	if err != nil {
		return // lease runs out; claimed again later
	}
	if len(h) == 0 {
		// Hash gone: record it (counted, removed from send_due); reconciliation
		// decides from PostgreSQL. Never a silent drop.
		if _, err := reservation.MarkSent(ctx, s.rdb, k, rid, reservation.OutcomeFailed, s.now(), s.opt.MaxAttempts, "reservation hash missing"); err == nil {
			s.log.Error("reservation.mq_resend_missing", "reservation_id", ridText, "activity_id", k.ActivityID, "sku_id", k.SKUID)
		}
		return
	}
	f, err := reservation.ParseFields(h)
	if err != nil {
		s.log.Error("senddue.bad_reservation", "reservation_id", ridText, "error", err)
		return
	}
	s.log.Info("reservation.mq_resend_claimed", "reservation_id", ridText, "message_id", f.MessageID,
		"attempt_count", f.SendAttempts+1)
	sctx, cancel := context.WithTimeout(ctx, s.opt.SendTimeout)
	defer cancel()
	outcome, errText := reservation.Send(sctx, s.pub, s.opt.Topic, f)
	s.m.Resend.Inc()
	s.m.SendTotal.WithLabelValues("scanner", outcome).Inc()
	if outcome == reservation.OutcomeUnknown {
		s.m.SendUnknown.Inc()
	}
	state, err := reservation.MarkSent(ctx, s.rdb, k, rid, outcome, s.now().Add(s.backoff(f.SendAttempts+1)), s.opt.MaxAttempts, errText)
	if err != nil {
		s.log.Warn("senddue.mark_failed", "reservation_id", ridText, "error", err)
		return
	}
	switch state {
	case reservation.OutcomePublished:
		s.m.SendAttempts.Observe(float64(f.SendAttempts + 1))
	case "GAVE_UP":
		s.m.SendGaveUp.Inc()
		s.log.Error("reservation.mq_send_gave_up", "reservation_id", ridText, "message_id", f.MessageID,
			"attempt_count", f.SendAttempts+1, "error", errText)
	}
}

// backoff is BaseBackoff·2^(attempt-1), capped at MaxBackoff.
func (s *Scanner) backoff(attempt int) time.Duration {
	d := s.opt.BaseBackoff
	for i := 1; i < attempt && d < s.opt.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.opt.MaxBackoff)
}
