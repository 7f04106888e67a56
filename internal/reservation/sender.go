package reservation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/failpoint"
	"github.com/seckill/seckill/internal/mq"
	"github.com/seckill/seckill/lua"
)

// The gateway sends ORDER_CREATE_REQUESTED right after a reservation, but not
// on the client's time: Reserve queues the message and answers QUEUED; one
// goroutine sends what is queued as RocketMQ batches (one broker round trip
// for up to MaxBatch messages) and records each outcome in its reservation
// hash. Nothing depends on this path succeeding: every reservation is in
// send_due from the reserve script on, and the send-due scanner re-sends it
// with the same message_id if the gateway did not confirm it (a full queue, a
// crash, a failed batch).

type sendItem struct {
	k lua.Keys
	f Fields
}

// sendNow queues the reservation's message. A full queue pushes back on the
// request (admission cannot outrun the broker for long) for at most the send
// timeout; past that the message is left to the scanner, never dropped.
func (r *Reserver) sendNow(ctx context.Context, k lua.Keys, f Fields) {
	select {
	case r.queue <- sendItem{k, f}:
		return
	default:
	}
	t := time.NewTimer(r.opt.SendTimeout)
	defer t.Stop()
	select {
	case r.queue <- sendItem{k, f}:
	case <-t.C:
		r.m.SendTotal.WithLabelValues("gateway", "queue_full").Inc()
	case <-ctx.Done():
		r.m.SendTotal.WithLabelValues("gateway", "queue_full").Inc()
	}
}

// Close stops the sender after it sent what was queued (bounded by the send
// timeout). Reservations not sent by then are the scanner's.
func (r *Reserver) Close() {
	r.closeOnce.Do(func() {
		close(r.queue)
		select {
		case <-r.stopped:
		case <-time.After(2 * r.opt.SendTimeout):
		}
	})
}

func (r *Reserver) sendLoop() {
	defer close(r.stopped)
	batch := make([]sendItem, 0, r.opt.MaxBatch)
	for first := range r.queue {
		batch = append(batch[:0], first)
		linger := time.NewTimer(r.opt.Linger)
	fill:
		for len(batch) < r.opt.MaxBatch {
			select {
			case it, ok := <-r.queue:
				if !ok {
					break fill
				}
				batch = append(batch, it)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		r.sendBatch(batch)
	}
}

// sendBatch sends one batch and records every reservation's outcome.
func (r *Reserver) sendBatch(batch []sendItem) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opt.SendTimeout)
	defer cancel()
	msgs := make([]mq.Message, 0, len(batch))
	sendable := batch[:0:0]
	for _, it := range batch {
		body, err := json.Marshal(it.f.Message())
		if err != nil {
			r.log.Error("reservation.encode_failed", "reservation_id", it.f.ReservationID, "error", err)
			continue
		}
		msgs = append(msgs, mq.Message{Topic: r.opt.Topic, Key: it.f.ReservationID.String(), ID: it.f.MessageID.String(),
			Tag: "ORDER_CREATE_REQUESTED", Body: body})
		sendable = append(sendable, it)
	}
	if len(msgs) == 0 {
		return
	}
	outcome, errText := classify(r.pub.SendBatch(ctx, msgs))
	r.m.SendTotal.WithLabelValues("gateway", outcome).Add(float64(len(msgs)))
	if outcome == OutcomeUnknown {
		r.m.SendUnknown.Add(float64(len(msgs)))
		r.log.Warn("reservation.mq_send_unknown", "messages", len(msgs), "error_class", "send_unknown", "error", errText)
	}
	if err := r.fp.Check(failpoint.AfterMQSendBeforeRedisMark); err != nil {
		return
	}
	now := r.now()
	sent := func(it sendItem) Sent {
		return Sent{Outcome: outcome, NextDue: now.Add(r.opt.RetryBackoff), Recheck: RecheckAt(it.f.DeadlineMS, now, r.opt.RecheckAfter), ErrText: errText}
	}
	pipe := r.rdb.Pipeline()
	for _, it := range sendable {
		markSent(ctx, pipe, it.k, it.f.ReservationID, sent(it))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if redis.HasErrorPrefix(err, "NOSCRIPT") { // Redis lost its script cache: mark one by one (EVAL fallback)
			for _, it := range sendable {
				if _, err = MarkSent(ctx, r.rdb, it.k, it.f.ReservationID, sent(it)); err != nil {
					break
				}
			}
		}
		if err != nil {
			// Items stay due in send_due: the scanner re-sends with the same message_id.
			r.log.Warn("reservation.mq_mark_failed", "messages", len(sendable), "error", err)
		}
	}
}
