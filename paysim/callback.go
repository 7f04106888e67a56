package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// delivery is one copy of an event on its way to the merchant.
type delivery struct {
	eventID string
	txn     string
	url     string
	body    []byte // the same bytes for every attempt and every copy
	copy    int    // 0 = first, 1.. = duplicates
	wait    time.Duration
}

// scheduleLocked creates the payment.succeeded event of p and starts its
// deliveries. s.mu must be held (so that no delivery starts after Close).
func (s *Server) scheduleLocked(p *Payment, opts PayOptions) {
	ev := Event{
		Type:            EventPaymentSucceeded,
		EventID:         "evt_" + uuid.NewString(),
		TransactionID:   p.TransactionID,
		MerchantOrderID: p.MerchantOrderID,
		AmountCents:     p.AmountCents,
		Currency:        p.Currency,
		PaidAt:          *p.PaidAt,
	}
	body, err := json.Marshal(ev)
	if err != nil { // cannot happen: all fields marshal
		s.log.Error("paysim.event_marshal", "err", err)
		return
	}
	s.cb.Events++
	if s.closed {
		s.log.Warn("paysim.callback_dropped_closed", "event_id", ev.EventID)
		return
	}
	delay := time.Duration(opts.CallbackDelayMS) * time.Millisecond
	for i := 0; i <= opts.Duplicates; i++ {
		d := delivery{eventID: ev.EventID, txn: p.TransactionID, url: p.CallbackURL, body: body, copy: i}
		switch {
		case i == 0:
			d.wait = delay
		case opts.Reorder: // duplicates first, right away
			d.wait = time.Duration(i-1) * duplicateSpacing
		default:
			d.wait = delay + time.Duration(i)*duplicateSpacing
		}
		s.cb.Deliveries++
		s.cb.InFlight++
		s.wg.Add(1)
		go s.deliver(d)
	}
}

// deliver waits d.wait, then posts until a 2xx, with doubling backoff, at most
// MaxCallbackAttempts times. It returns early when the server is closed.
func (s *Server) deliver(d delivery) {
	defer s.wg.Done()
	if !s.sleep(d.wait) {
		return
	}
	backoff := s.opts.CallbackBackoff
	for attempt := 1; ; attempt++ {
		status, err := s.attempt(d)
		ok := err == nil && status >= 200 && status < 300
		s.mu.Lock()
		s.cb.Sent++
		if ok {
			s.cb.Acked++
			s.cb.InFlight--
		} else if s.ctx.Err() == nil {
			s.cb.Failed++
		}
		s.mu.Unlock()
		if ok {
			s.log.Info("paysim.callback_acked", "event_id", d.eventID, "transaction_id", d.txn, "copy", d.copy, "attempt", attempt, "status", status)
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("paysim.callback_failed", "event_id", d.eventID, "transaction_id", d.txn, "copy", d.copy, "attempt", attempt, "status", status, "err", err)
		if attempt >= s.opts.MaxCallbackAttempts {
			s.mu.Lock()
			s.cb.GivenUp++
			s.cb.InFlight--
			s.mu.Unlock()
			s.log.Error("paysim.callback_given_up", "event_id", d.eventID, "transaction_id", d.txn, "copy", d.copy, "attempts", attempt)
			return
		}
		if !s.sleep(backoff) {
			return
		}
		backoff = min(backoff*2, s.opts.MaxCallbackBackoff)
	}
}

// attempt makes one signed POST; it returns the response status.
func (s *Server) attempt(d delivery) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.CallbackTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return 0, err
	}
	ts := s.opts.Clock()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "seckill-paysim/1")
	req.Header.Set(HeaderWebhookID, d.eventID)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(HeaderWebhookSignature, Sign(s.opts.Secret, d.eventID, ts, d.body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// sleep waits d; false when the server closed first.
func (s *Server) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	select {
	case <-s.opts.After(d):
		return true
	case <-s.ctx.Done():
		return false
	}
}
