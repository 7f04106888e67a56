package mq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Defaults for ConsumerOptions.
const (
	// DefaultConcurrency is the SDK's default number of concurrent handler calls.
	DefaultConcurrency = 20
	// DefaultMaxReconsume is RocketMQ's default redelivery limit before the dead-letter queue.
	DefaultMaxReconsume = 16
)

// ConsumerOptions tunes a Consumer. The zero value uses the defaults.
type ConsumerOptions struct {
	// Concurrency bounds concurrent handler calls for the topic (SDK
	// ConsumeGoroutineNums; 0 means DefaultConcurrency). Redeliveries come from
	// the group's retry topic, which the SDK bounds separately with the same
	// number, so up to 2*Concurrency calls can run at once.
	Concurrency int
	// MaxReconsume is how many times a message whose handler failed is
	// redelivered before it is moved to the group's dead-letter queue
	// (%DLQ%<group>); 0 means DefaultMaxReconsume.
	MaxReconsume int
	// Tags is a tag filter expression ("a", "a || b"); empty means all ("*").
	Tags string
	// RetryDelayLevel picks when a message whose handler failed comes back.
	// 0 uses the broker's growing schedule (10s, 30s, 1m, 2m, ... by attempt);
	// 1..18 fixes RocketMQ's delay level for every retry (1=1s, 2=5s, 3=10s,
	// 4=30s, 5=1m, ... 18=2h).
	RetryDelayLevel int
	// FromLatest makes a group new to the broker start after the last stored
	// message instead of the first (the default, so that a new group misses
	// nothing sent before it first ran). For groups that must ignore what
	// other runs left on a shared topic (the crash-point matrix).
	FromLatest bool
}

// Handler processes one delivered message. Returning nil acknowledges it;
// returning an error (or panicking) asks for a later redelivery; the error
// itself is not logged here. The context is cancelled when the Consumer is
// closed.
type Handler func(ctx context.Context, m Delivered) error

// Consumer is a push consumer in clustering mode: the group's members share
// the topic's queues, and a group new to the broker starts from the first
// stored message.
type Consumer struct {
	pc      sdkPushConsumer
	group   string
	topic   string
	handler Handler

	retryDelayLevel int

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	started bool
	closed  bool
}

// sdkPushConsumer is the part of the SDK push consumer this package uses.
type sdkPushConsumer interface {
	Start() error
	Shutdown() error
	Subscribe(topic string, selector consumer.MessageSelector,
		f func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) error
}

// NewConsumer creates (but does not start) a consumer of topic in consumer
// group group, talking to ep's name servers as ep's user.
func NewConsumer(ep Endpoint, group, topic string, handler Handler, opts ConsumerOptions) (*Consumer, error) {
	if group == "" {
		return nil, errors.New("new consumer: empty group")
	}
	if topic == "" {
		return nil, fmt.Errorf("new consumer %s: empty topic", group)
	}
	if handler == nil {
		return nil, fmt.Errorf("new consumer %s: nil handler", group)
	}
	if opts.Concurrency < 0 || opts.MaxReconsume < 0 || opts.MaxReconsume > math.MaxInt16 {
		return nil, fmt.Errorf("new consumer %s: concurrency must not be negative, max reconsume in [0, %d]", group, math.MaxInt16)
	}
	if opts.RetryDelayLevel < 0 || opts.RetryDelayLevel > 18 {
		return nil, fmt.Errorf("new consumer %s: retry delay level %d out of range [0, 18]", group, opts.RetryDelayLevel)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.MaxReconsume == 0 {
		opts.MaxReconsume = DefaultMaxReconsume
	}
	tags := opts.Tags
	if tags == "" {
		tags = "*"
	}
	addrs, err := resolveNameServers(ep.NameServers)
	if err != nil {
		return nil, fmt.Errorf("new consumer %s: %w", group, err)
	}
	from := consumer.ConsumeFromFirstOffset
	if opts.FromLatest {
		from = consumer.ConsumeFromLastOffset
	}
	pc, err := consumer.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver(addrs)),
		consumer.WithGroupName(group),
		consumer.WithCredentials(ep.Credentials()),
		consumer.WithInstance(newInstanceName("consumer", group)),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(from),
		consumer.WithConsumeGoroutineNums(opts.Concurrency),
		consumer.WithMaxReconsumeTimes(int32(opts.MaxReconsume)), // #nosec G115 -- bounded above
		consumer.WithConsumeMessageBatchMaxSize(1),
	)
	if err != nil {
		return nil, fmt.Errorf("new consumer %s: %w", group, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{pc: pc, group: group, topic: topic, handler: handler, retryDelayLevel: opts.RetryDelayLevel,
		ctx: ctx, cancel: cancel}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: tags}
	if err := pc.Subscribe(topic, sel, c.consume); err != nil {
		cancel()
		return nil, fmt.Errorf("subscribe %s to %s: %w", group, topic, err)
	}
	return c, nil
}

// Start connects to the name server and broker and begins delivering
// messages. It fails when the topic has no route (it does not exist or the
// name server is unreachable); a Consumer whose Start failed cannot be
// started again: create a new one.
func (c *Consumer) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("start consumer %s: %w", c.group, ErrClosed)
	}
	if c.started {
		return nil
	}
	if err := c.pc.Start(); err != nil {
		return fmt.Errorf("start consumer %s on %s: %w", c.group, c.topic, err)
	}
	c.started = true
	// After its one-time setup the SDK's Start refreshes routes, heartbeats
	// and rebalances on every call. The first call's heartbeat makes the
	// broker create the group's retry topic (%RETRY%<group>) if the group is
	// new; this second call learns its route now instead of on the SDK's 30 s
	// route poll, so redeliveries to a new group start within seconds.
	if err := c.pc.Start(); err != nil {
		return fmt.Errorf("start consumer %s on %s: refresh routes: %w", c.group, c.topic, err)
	}
	return nil
}

// consume is the SDK callback; batches hold one message (batch size 1).
func (c *Consumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	for _, m := range msgs {
		if err := c.handle(m); err != nil {
			if c.retryDelayLevel > 0 {
				if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
					cc.DelayLevelWhenNextConsume = c.retryDelayLevel
				}
			}
			return consumer.ConsumeRetryLater, nil
		}
	}
	return consumer.ConsumeSuccess, nil
}

// handle runs the handler for one message, turning a panic into an error so
// the message is redelivered instead of being stuck in the SDK.
func (c *Consumer) handle(m *primitive.MessageExt) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	d := Delivered{
		Topic:          m.Topic,
		Key:            m.GetKeys(),
		Tag:            m.GetTags(),
		ID:             m.GetProperty(PropertyMessageID),
		Body:           m.Body,
		ReconsumeTimes: int(m.ReconsumeTimes),
		BrokerMsgID:    m.MsgId,
		OffsetMsgID:    m.OffsetMsgId,
		QueueOffset:    m.QueueOffset,
		Properties:     m.GetProperties(),
	}
	if m.Queue != nil {
		d.QueueID = m.Queue.QueueId
	}
	return c.handler(c.ctx, d)
}

// Close stops delivery, cancels the handlers' context and commits consumed
// offsets to the broker. Calling Close again returns nil.
func (c *Consumer) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.cancel()
	if !c.started {
		// the SDK consumer was never started (or its failed Start already shut it down)
		return nil
	}
	if mu := rebalanceLock(c.pc); mu != nil {
		// Not under a rebalance (shutdown.go).
		mu.Lock()
		defer mu.Unlock()
	}
	if err := c.pc.Shutdown(); err != nil {
		return fmt.Errorf("shutdown consumer %s: %w", c.group, err)
	}
	return nil
}
