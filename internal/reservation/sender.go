package reservation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/mq"
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
	r.markBatch(ctx, sendable, Sent{Outcome: outcome, NextDue: r.now().Add(r.opt.RetryBackoff), ErrText: errText})
}

// markBatch records one batch's outcome: one send_done.lua call per SKU of
// the batch (a flash sale's batch is one SKU: one Redis round trip and one
// script call for the whole batch), pipelined.
func (r *Reserver) markBatch(ctx context.Context, batch []sendItem, s Sent) {
	now := r.now()
	bySKU := map[lua.Keys][]lua.SendDoneItem{}
	var order []lua.Keys
	for _, it := range batch {
		if _, ok := bySKU[it.k]; !ok {
			order = append(order, it.k)
		}
		bySKU[it.k] = append(bySKU[it.k], lua.SendDoneItem{ReservationID: it.f.ReservationID.String(),
			RecheckMS: RecheckAt(it.f.DeadlineMS, now, r.opt.RecheckAfter).UnixMilli()})
	}
	pipe := r.rdb.Pipeline()
	for _, k := range order {
		lua.QueueSendDone(ctx, pipe, k, sendDoneArgs(s, bySKU[k]))
	}
	_, err := pipe.Exec(ctx)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // Redis lost its script cache: run them (EVAL fallback)
		for _, k := range order {
			if _, err = lua.SendDone(ctx, r.rdb, k, sendDoneArgs(s, bySKU[k])); err != nil {
				break
			}
		}
	}
	if err != nil {
		// Items stay due in send_due: the scanner re-sends with the same message_id.
		r.log.Warn("reservation.mq_mark_failed", "messages", len(batch), "error", err)
	}
}
