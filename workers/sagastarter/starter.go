// Package sagastarter consumes ORDER_CREATE_REQUESTED from RocketMQ and starts
// one ReservationSaga per reservation. It acknowledges a message only after
// Temporal accepted the start; starting twice is harmless (workflow ID from
// reservation_id, conflict policy use-existing). Its consumer_inbox row says
// RECEIVED until Temporal accepted the start and SAGA_STARTED after, so the
// inbox never claims a saga that does not exist. Malformed messages and
// same-id-different-payload messages are quarantined, never dropped, and so
// are forged ones: a message whose reservation_id and message_id are not the
// ones its fields derive under the ID secrets (docs/spec.md#stable-ids) did
// not come from the gateway's admission and starts nothing.
package sagastarter

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/quarantine"
	"github.com/seckill/seckill/workflows"
)

// ConsumerGroup is the RocketMQ consumer group and the consumer_inbox group of the starter.
const ConsumerGroup = "saga-starter"

// Results of handling one delivery (metric label values).
const (
	ResultStarted     = "started"
	ResultDuplicate   = "duplicate"
	ResultQuarantined = "quarantined"
	ResultRetry       = "retry"
)

// Starter handles deliveries.
type Starter struct {
	pool      *pgxpool.Pool
	temporal  client.Client
	taskQueue string
	ids       *ids.Deriver
	forged    prometheus.Counter
	log       *slog.Logger
	consumed  *prometheus.CounterVec
	quarant   prometheus.Counter
	lag       prometheus.Gauge
	// PayloadConflicts, if set, counts same-id-different-payload messages
	// (seckill_inbox_payload_conflict_total, a critical alert).
	PayloadConflicts prometheus.Counter
	// Failpoints, if set, may stop the starter after its inbox commit,
	// before the broker hears the acknowledgement (after_pg_commit_before_ack).
	Failpoints *failpoint.Set
}

// New returns a Starter; every dependency is required. d holds the ID
// secrets (every key version the gateway may still use) the starter
// re-derives each message's IDs with.
func New(pool *pgxpool.Pool, tc client.Client, taskQueue string, d *ids.Deriver, reg prometheus.Registerer, log *slog.Logger) (*Starter, error) {
	if pool == nil || tc == nil || taskQueue == "" || d == nil || reg == nil || log == nil {
		return nil, errors.New("sagastarter: nil dependency")
	}
	f := promauto.With(reg)
	return &Starter{pool: pool, temporal: tc, taskQueue: taskQueue, ids: d, log: log,
		forged: f.NewCounter(prometheus.CounterOpts{Name: "seckill_message_forged_total",
			Help: "ORDER_CREATE_REQUESTED messages quarantined because their ids do not derive from their fields (not minted by the gateway)."}),
		consumed: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_order_consume_total",
			Help: "ORDER_CREATE_REQUESTED deliveries handled by the saga starter, by result."}, []string{"result"}),
		quarant: f.NewCounter(prometheus.CounterOpts{Name: "seckill_message_quarantined_total",
			Help: "Messages quarantined (malformed or same id with another payload): the dead-letter of this system."}),
		lag: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_order_consume_oldest_age_seconds",
			Help: "Age (since reservation) of the ORDER_CREATE_REQUESTED consumed last: the MQ lag."}),
	}, nil
}

// Handle is the mq.Handler: nil acknowledges, an error asks for redelivery.
func (s *Starter) Handle(ctx context.Context, d mq.Delivered) error {
	result, err := s.handle(ctx, d)
	if err != nil {
		result = ResultRetry
		s.log.Warn("order.consume_retry", "message_id", d.ID, "broker_msg_id", d.BrokerMsgID, "reconsume", d.ReconsumeTimes, "error", err)
	}
	s.consumed.WithLabelValues(result).Inc()
	return err
}

func (s *Starter) handle(ctx context.Context, d mq.Delivered) (string, error) {
	m, err := events.DecodeOrderCreateRequested(d.Body)
	if err != nil {
		return ResultQuarantined, s.quarantine(ctx, d, nil, "INVALID_MESSAGE: "+err.Error())
	}
	if d.ID != m.MessageID.String() {
		return ResultQuarantined, s.quarantine(ctx, d, nil, fmt.Sprintf("INVALID_MESSAGE: message_id property %q differs from body %s", d.ID, m.MessageID))
	}
	if err := m.VerifyIDs(s.ids); err != nil {
		s.forged.Inc()
		return ResultQuarantined, s.quarantine(ctx, d, nil, "FORGED_MESSAGE: "+err.Error())
	}
	s.lag.Set(time.Since(m.ReservedAt).Seconds())
	hash := inbox.PayloadHash(m)
	prior, err := s.recordInbox(ctx, d, m, hash)
	if err != nil {
		if errors.Is(err, inbox.ErrPayloadConflict) {
			if s.PayloadConflicts != nil {
				s.PayloadConflicts.Inc()
			}
			return ResultQuarantined, s.quarantine(ctx, d, hash, "PAYLOAD_CONFLICT: same message_id, different payload")
		}
		return "", err
	}
	// Started again even when the inbox says SAGA_STARTED: the call is
	// idempotent and cheap next to a saga that would otherwise never exist.
	if err := s.start(ctx, m); err != nil {
		return "", err // the row stays RECEIVED; the redelivery starts it
	}
	if prior == inboxSagaStarted {
		return ResultDuplicate, nil
	}
	marked, err := s.markStarted(ctx, m)
	if err != nil {
		return "", err
	}
	if !marked {
		return ResultDuplicate, nil // a concurrent delivery of the same message recorded it
	}
	if err := s.Failpoints.Check(failpoint.AfterPGCommitBeforeAck); err != nil {
		return "", err // recorded, not acknowledged: the redelivery is a duplicate
	}
	return ResultStarted, nil
}

// result_code values of the starter's consumer_inbox rows.
const (
	// inboxReceived: the message was accepted, Temporal has not (yet) accepted the saga's start.
	inboxReceived = "RECEIVED"
	// inboxSagaStarted: Temporal accepted the start (or already had the saga).
	inboxSagaStarted = "SAGA_STARTED"
)

// recordInbox writes the starter's inbox row as RECEIVED. prior is the
// result_code of an earlier delivery's row, "" when this delivery inserted it.
func (s *Starter) recordInbox(ctx context.Context, d mq.Delivered, m events.OrderCreateRequested, hash []byte) (prior string, err error) {
	claimed, err := inbox.Claim(ctx, s.pool, inbox.Entry{Group: ConsumerGroup, Topic: d.Topic, Message: m, Hash: hash, Code: inboxReceived})
	if err != nil || claimed {
		return "", err
	}
	rec, err := inbox.Lookup(ctx, s.pool, ConsumerGroup, m.MessageID)
	if err != nil {
		return "", err
	}
	if !rec.Same(hash) {
		return rec.Code, inbox.ErrPayloadConflict
	}
	return rec.Code, nil
}

// markStarted records that Temporal accepted the saga's start: RECEIVED →
// SAGA_STARTED. marked is false when another delivery of the same message
// recorded it first (the row was re-read and says SAGA_STARTED).
func (s *Starter) markStarted(ctx context.Context, m events.OrderCreateRequested) (marked bool, err error) {
	marked, err = inbox.Advance(ctx, s.pool, ConsumerGroup, m.MessageID, inboxReceived, inboxSagaStarted)
	if err != nil || marked {
		return marked, err
	}
	rec, err := inbox.Lookup(ctx, s.pool, ConsumerGroup, m.MessageID)
	if err != nil {
		return false, err
	}
	if rec.Code != inboxSagaStarted {
		return false, fmt.Errorf("starter inbox of message %s is %q, want %s or %s", m.MessageID, rec.Code, inboxReceived, inboxSagaStarted)
	}
	return false, nil
}

// start starts the saga, or finds it already there.
func (s *Starter) start(ctx context.Context, m events.OrderCreateRequested) error {
	return workflows.StartSaga(ctx, s.temporal, s.taskQueue, m)
}

// quarantine keeps a refused message whole, visible and counted; the caller
// acknowledges it afterwards. A failed insert returns an error: redelivery.
func (s *Starter) quarantine(ctx context.Context, d mq.Delivered, hash []byte, reason string) error {
	if hash == nil {
		h := sha256.Sum256(d.Body)
		hash = h[:]
	}
	if _, err := quarantine.Insert(ctx, s.pool, quarantine.Message{Group: ConsumerGroup, Topic: d.Topic, MessageID: d.ID,
		BrokerMsgID: d.BrokerMsgID, Reason: reason, PayloadHash: hash, Body: d.Body, Source: quarantine.SourceConsumer}); err != nil {
		return fmt.Errorf("quarantine message %s: %w", d.ID, err)
	}
	s.quarant.Inc()
	s.log.Error("order.message_quarantined", "message_id", d.ID, "broker_msg_id", d.BrokerMsgID, "consumer_group", ConsumerGroup,
		"reason", reason, "error_class", "quarantined")
	return nil
}
