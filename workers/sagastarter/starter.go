// Package sagastarter consumes ORDER_CREATE_REQUESTED from RocketMQ and starts
// one ReservationSaga per reservation. It acknowledges a message only after
// Temporal accepted the start; starting twice is harmless (workflow ID from
// reservation_id, conflict policy use-existing). Malformed messages and
// same-id-different-payload messages are quarantined, never dropped.
package sagastarter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/mq"
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
	log       *slog.Logger
	consumed  *prometheus.CounterVec
	quarant   prometheus.Counter
	lag       prometheus.Gauge
	// PayloadConflicts, if set, counts same-id-different-payload messages
	// (seckill_inbox_payload_conflict_total, a critical alert).
	PayloadConflicts prometheus.Counter
}

// New returns a Starter; every dependency is required.
func New(pool *pgxpool.Pool, tc client.Client, taskQueue string, reg prometheus.Registerer, log *slog.Logger) (*Starter, error) {
	if pool == nil || tc == nil || taskQueue == "" || reg == nil || log == nil {
		return nil, errors.New("sagastarter: nil dependency")
	}
	f := promauto.With(reg)
	return &Starter{pool: pool, temporal: tc, taskQueue: taskQueue, log: log,
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
	s.lag.Set(time.Since(m.ReservedAt).Seconds())
	hash := activities.PayloadHash(m)
	dup, err := s.recordInbox(ctx, d, m, hash)
	if err != nil {
		if errors.Is(err, errPayloadConflict) {
			if s.PayloadConflicts != nil {
				s.PayloadConflicts.Inc()
			}
			return ResultQuarantined, s.quarantine(ctx, d, hash, "PAYLOAD_CONFLICT: same message_id, different payload")
		}
		return "", err
	}
	if err := s.start(ctx, m); err != nil {
		return "", err
	}
	if dup {
		return ResultDuplicate, nil
	}
	return ResultStarted, nil
}

var errPayloadConflict = errors.New("same message_id with a different payload")

// recordInbox writes the starter's inbox row; dup reports an earlier delivery.
func (s *Starter) recordInbox(ctx context.Context, d mq.Delivered, m events.OrderCreateRequested, hash []byte) (dup bool, err error) {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'SAGA_STARTED')
		ON CONFLICT (consumer_group, message_id) DO NOTHING`,
		ConsumerGroup, m.MessageID, d.Topic, m.EventType, m.ReservationID, m.RequestID, hash)
	if err != nil {
		return false, fmt.Errorf("starter inbox: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return false, nil
	}
	var prior []byte
	if err := s.pool.QueryRow(ctx, `SELECT payload_hash FROM consumer_inbox WHERE consumer_group = $1 AND message_id = $2`,
		ConsumerGroup, m.MessageID).Scan(&prior); err != nil {
		return true, fmt.Errorf("read starter inbox: %w", err)
	}
	if !bytes.Equal(prior, hash) {
		return true, errPayloadConflict
	}
	return true, nil
}

// start starts the saga, or finds it already there.
func (s *Starter) start(ctx context.Context, m events.OrderCreateRequested) error {
	_, err := s.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.ReservationWorkflowID(m.ReservationID.String()),
		TaskQueue:                s.taskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// A finished saga is never started again by a late duplicate.
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// Shown on the workflow's page in the UI (not searchable; no personal data).
		Memo: map[string]any{"activity_id": m.ActivityID, "sku_id": m.SKUID, "message_id": m.MessageID.String(),
			"reserved_at": m.ReservedAt, "business_deadline": m.BusinessDeadline},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.SearchReservationStatus.ValueSet(workflows.StatusReserved),
			workflows.SearchActivityID.ValueSet(m.ActivityID),
			workflows.SearchSKUID.ValueSet(m.SKUID)),
	}, workflows.ReservationSaga, workflows.SagaInput{Message: m})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("start saga of %s: %w", m.ReservationID, err)
	}
	return nil
}

// quarantine keeps a refused message whole, visible and counted; the caller
// acknowledges it afterwards. A failed insert returns an error: redelivery.
func (s *Starter) quarantine(ctx context.Context, d mq.Delivered, hash []byte, reason string) error {
	if hash == nil {
		h := sha256.Sum256(d.Body)
		hash = h[:]
	}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO message_quarantine (consumer_group, topic, message_id, broker_msg_id, reason, payload_hash, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (consumer_group, broker_msg_id) DO NOTHING`,
		ConsumerGroup, d.Topic, d.ID, d.BrokerMsgID, reason, hash, d.Body); err != nil {
		return fmt.Errorf("quarantine message %s: %w", d.ID, err)
	}
	s.quarant.Inc()
	s.log.Error("order.message_quarantined", "message_id", d.ID, "broker_msg_id", d.BrokerMsgID, "consumer_group", ConsumerGroup,
		"reason", reason, "error_class", "quarantined")
	return nil
}
