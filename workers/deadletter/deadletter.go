// Package deadletter keeps the messages RocketMQ gave up on. A message whose
// consumer failed it more often than the group's redelivery limit
// (mq.DefaultMaxReconsume, 16 redeliveries ≈ 4.7 h on the broker's growing
// schedule) moves to the broker's dead-letter topic %DLQ%<group>, which no
// business consumer reads. The Consumer here reads it and copies every message
// into message_quarantine (source DLQ), counted and logged, so that it is
// visible and can be replayed to its original topic (Replay, `seckill mq
// replay-dlq`) once the cause is fixed.
package deadletter

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

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/quarantine"
)

// Defaults of Options.
const (
	// DefaultRetryEvery is the pause between attempts to start the RocketMQ
	// consumer while it cannot start (the dead-letter topic has no route yet,
	// the name server is down).
	DefaultRetryEvery = 30 * time.Second
	// DefaultConcurrency bounds concurrent handler calls: dead letters are rare.
	DefaultConcurrency = 4
	// MaxReconsume is the redelivery limit of the dead-letter consumer itself.
	// Its handler only inserts one row, so it fails only while PostgreSQL is
	// unreachable; 64 redeliveries (≈ 4.7 h, then one every 2 h: about 4 days)
	// outlast any such outage. Past it a message would move on to
	// %DLQ%<group>-dlq, which nothing reads.
	MaxReconsume = 64
)

// SourceDLQ is message_quarantine.source of the rows this package writes (the
// saga starter's own quarantine rows are 'CONSUMER').
const SourceDLQ = quarantine.SourceDLQ

// Topic is the broker's dead-letter topic of consumer group group.
func Topic(group string) string { return "%DLQ%" + group }

// ConsumerGroup is the consumer group that reads group's dead-letter topic.
func ConsumerGroup(group string) string { return group + "-dlq" }

// Options configures a Consumer.
type Options struct {
	// Broker is the RocketMQ name servers ("host:port") and the ACL user.
	// Required.
	Broker mq.Endpoint
	// Group is the consumer group whose dead letters are read (the saga
	// starter's, config StarterGroup). Required. Rows are recorded under it.
	Group string
	// DefaultTopic is recorded as a row's original topic when the message does
	// not name one (property mq.PropertyRetryTopic): the topic Group consumes
	// (config TopicOrderCreate). Required.
	DefaultTopic string
	// RetryEvery is the pause between attempts to start the RocketMQ consumer
	// (0 means DefaultRetryEvery).
	RetryEvery time.Duration
	// Concurrency bounds concurrent handler calls (0 means DefaultConcurrency).
	Concurrency int
}

// Consumer copies the messages of one consumer group's dead-letter topic into
// message_quarantine.
type Consumer struct {
	pool *pgxpool.Pool
	opt  Options
	log  *slog.Logger

	deadLettered prometheus.Counter
}

// New returns a Consumer; every dependency and the required options are checked.
func New(pool *pgxpool.Pool, opt Options, reg prometheus.Registerer, log *slog.Logger) (*Consumer, error) {
	if pool == nil || reg == nil || log == nil {
		return nil, errors.New("deadletter: nil dependency")
	}
	if len(opt.Broker.NameServers) == 0 || opt.Group == "" || opt.DefaultTopic == "" {
		return nil, errors.New("deadletter: options need name servers, a group and a default topic")
	}
	if opt.RetryEvery <= 0 {
		opt.RetryEvery = DefaultRetryEvery
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = DefaultConcurrency
	}
	return &Consumer{pool: pool, opt: opt, log: log,
		deadLettered: promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "seckill_message_dead_lettered_total",
			Help: "Messages the broker dead-lettered (%DLQ%<group>: redelivery exhausted), copied to message_quarantine with source DLQ."}),
	}, nil
}

// Run consumes the dead-letter topic until ctx ends. While the RocketMQ
// consumer cannot start (the topic has no route: it does not exist yet, or
// the name server is unreachable) it logs and tries again every
// Options.RetryEvery. It returns nil when ctx ends.
func (c *Consumer) Run(ctx context.Context) error {
	topic, group := Topic(c.opt.Group), ConsumerGroup(c.opt.Group)
	for ctx.Err() == nil {
		cons, err := c.start(topic, group)
		if err == nil {
			c.log.Info("mq.dead_letter_consumer_started", "topic", topic, "consumer_group", group)
			<-ctx.Done()
			if err := cons.Close(); err != nil {
				c.log.Warn("mq.dead_letter_consumer_close_failed", "topic", topic, "consumer_group", group, "error", err)
			}
			return nil
		}
		c.log.Warn("mq.dead_letter_consumer_start_failed", "topic", topic, "consumer_group", group,
			"retry_in", c.opt.RetryEvery.String(), "error", err)
		t := time.NewTimer(c.opt.RetryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	return nil
}

// start creates and starts a RocketMQ consumer; a consumer whose Start failed
// cannot be started again, so every attempt builds a new one.
func (c *Consumer) start(topic, group string) (*mq.Consumer, error) {
	cons, err := mq.NewConsumer(c.opt.Broker, group, topic, c.Handle,
		mq.ConsumerOptions{Concurrency: c.opt.Concurrency, MaxReconsume: MaxReconsume})
	if err != nil {
		return nil, err
	}
	if err := cons.Start(); err != nil {
		_ = cons.Close()
		return nil, err
	}
	return cons, nil
}

// Handle is the mq.Handler of the dead-letter topic: it records d in
// message_quarantine (once per broker message) and acknowledges it; a failed
// insert returns an error, so the broker delivers it again.
func (c *Consumer) Handle(ctx context.Context, d mq.Delivered) error {
	topic := d.Properties[mq.PropertyRetryTopic]
	if topic == "" {
		topic = c.opt.DefaultTopic
	}
	hash := sha256.Sum256(d.Body)
	reason := fmt.Sprintf("DLQ: redelivered %d times without success", Redeliveries(d.ReconsumeTimes))
	reconsumed := d.ReconsumeTimes
	wrote, err := quarantine.Insert(ctx, c.pool, quarantine.Message{Group: c.opt.Group, Topic: topic, MessageID: d.ID,
		BrokerMsgID: d.BrokerMsgID, Reason: reason, PayloadHash: hash[:], Body: d.Body, Source: SourceDLQ, ReconsumeTimes: &reconsumed})
	if err != nil {
		return fmt.Errorf("quarantine dead-lettered message %s (broker id %s): %w", d.ID, d.BrokerMsgID, err)
	}
	if !wrote {
		// The same broker message again (an acknowledgement was lost): recorded already.
		c.log.Info("mq.dead_lettered_duplicate", "message_id", d.ID, "broker_msg_id", d.BrokerMsgID, "consumer_group", c.opt.Group)
		return nil
	}
	c.deadLettered.Inc()
	c.log.Error("mq.dead_lettered", "message_id", d.ID, "broker_msg_id", d.BrokerMsgID, "consumer_group", c.opt.Group,
		"topic", topic, "reconsume_times", d.ReconsumeTimes, "redeliveries", Redeliveries(d.ReconsumeTimes), "error_class", "dead_lettered")
	return nil
}

// Redeliveries is how many times a dead-lettered message was redelivered,
// from its reconsume times in the DLQ (kept as is in reconsume_times). The
// broker counts the failure that sent it to the DLQ too, so that number is
// the failed deliveries: the first delivery plus the redeliveries (with
// MaxReconsume 16 it is 17; measured on RocketMQ 5.3, see the integration test).
func Redeliveries(reconsumeTimes int) int { return max(reconsumeTimes-1, 0) }
