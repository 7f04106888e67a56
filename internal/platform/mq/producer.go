package mq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Defaults for NewProducer.
const (
	// DefaultSendTimeout bounds one send attempt (route lookup + request + answer).
	DefaultSendTimeout = 3 * time.Second
	// DefaultSendRetries is how many times a definitely failed send is retried.
	DefaultSendRetries = 2
)

// SendStatus is the broker's verdict on a stored message.
type SendStatus string

// Send statuses. All of them mean the master broker stored the message; the
// non-OK ones report that flushing to disk or replicating to a slave did not
// finish in time.
const (
	SendOK                SendStatus = "SEND_OK"
	SendFlushDiskTimeout  SendStatus = "FLUSH_DISK_TIMEOUT"
	SendFlushSlaveTimeout SendStatus = "FLUSH_SLAVE_TIMEOUT"
	SendSlaveNotAvailable SendStatus = "SLAVE_NOT_AVAILABLE"
)

// SendResult describes a message the broker stored.
type SendResult struct {
	// MsgID is RocketMQ's message id (client-generated unique key); consumers see it as Delivered.BrokerMsgID.
	MsgID string
	// OffsetMsgID is the broker's storage id (store host + commit log offset).
	OffsetMsgID string
	// Topic, BrokerName, QueueID and QueueOffset locate the stored message.
	Topic       string
	BrokerName  string
	QueueID     int
	QueueOffset int64
	// Status is SendOK unless flush/replication lagged (the message is stored either way).
	Status SendStatus
}

// ProducerOption configures NewProducer.
type ProducerOption func(*producerConfig)

type producerConfig struct {
	sendTimeout time.Duration
	retries     int
}

// WithSendTimeout bounds each send attempt (default DefaultSendTimeout). When
// it expires the outcome is unknown and Send returns ErrSendUnknown.
func WithSendTimeout(d time.Duration) ProducerOption {
	return func(c *producerConfig) {
		if d > 0 {
			c.sendTimeout = d
		}
	}
}

// Producer sends messages synchronously. It is safe for concurrent use.
type Producer struct {
	p      sdkProducer
	group  string
	cfg    producerConfig
	closed atomic.Bool
	// inflight is held for reading by every SDK send until it returns, and
	// for writing by Close: the SDK must not be shut down under a send.
	inflight sync.RWMutex
}

// sdkProducer is the part of the SDK producer this package uses.
type sdkProducer interface {
	Start() error
	Shutdown() error
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// NewProducer creates and starts a producer in producer group group, talking
// to ep's name servers as ep's user. Starting does not contact the name
// server: an unreachable one shows up as an error from Send.
func NewProducer(ep Endpoint, group string, opts ...ProducerOption) (*Producer, error) {
	if group == "" {
		return nil, errors.New("new producer: empty group")
	}
	addrs, err := resolveNameServers(ep.NameServers)
	if err != nil {
		return nil, fmt.Errorf("new producer %s: %w", group, err)
	}
	cfg := producerConfig{sendTimeout: DefaultSendTimeout, retries: DefaultSendRetries}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(addrs)),
		producer.WithGroupName(group),
		producer.WithCredentials(ep.Credentials()),
		producer.WithInstanceName(newInstanceName("producer", group)),
		producer.WithSendMsgTimeout(cfg.sendTimeout),
		// retries are done here, only for definite failures (see Send)
		producer.WithRetry(0),
	)
	if err != nil {
		return nil, fmt.Errorf("new producer %s: %w", group, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("start producer %s: %w", group, err)
	}
	return &Producer{p: p, group: group, cfg: cfg}, nil
}

type sendOutcome struct {
	res *primitive.SendResult
	err error
}

// Send sends m and waits for the broker's answer, at most the send timeout per
// attempt (and never past ctx's deadline). Definite failures (no route, broker
// unreachable, broker rejected the message) are retried DefaultSendRetries
// times; an unknown outcome never is, so a retry cannot duplicate a message.
// On success the message is stored. An error wrapping
// ErrSendUnknown means the message may or may not have been stored; any other
// error means it was not.
func (p *Producer) Send(ctx context.Context, m Message) (SendResult, error) {
	return p.SendBatch(ctx, []Message{m})
}

// SendBatch sends msgs, all to the same topic, as one RocketMQ batch: the
// broker stores all or none, and consumers still receive them one by one
// with their own keys and properties. Outcomes are as for Send.
func (p *Producer) SendBatch(ctx context.Context, msgs []Message) (SendResult, error) {
	if len(msgs) == 0 {
		return SendResult{}, errors.New("send: no messages")
	}
	m := msgs[0]
	if p.closed.Load() {
		return SendResult{}, fmt.Errorf("send to %s: %w", m.Topic, ErrClosed)
	}
	for _, x := range msgs {
		if x.Topic == "" {
			return SendResult{}, errors.New("send: empty topic")
		}
		if x.Topic != m.Topic {
			return SendResult{}, fmt.Errorf("send batch: topics %s and %s differ", m.Topic, x.Topic)
		}
		if len(x.Body) == 0 {
			return SendResult{}, fmt.Errorf("send to %s: empty body", x.Topic)
		}
	}
	var lastErr error
	for attempt := 0; attempt <= p.cfg.retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				// nothing was in flight: the earlier attempts failed definitely
				return SendResult{}, fmt.Errorf("send to %s: %w (after: %v)", m.Topic, ctx.Err(), lastErr)
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return SendResult{}, fmt.Errorf("send to %s: %w", m.Topic, err)
		}
		res, err := p.sendOnce(ctx, msgs)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, ErrSendUnknown) {
			return SendResult{}, fmt.Errorf("send to %s: %w", m.Topic, err)
		}
		if errors.Is(err, ErrClosed) {
			return SendResult{}, err
		}
		lastErr = err
	}
	return SendResult{}, fmt.Errorf("send to %s failed after %d attempts: %w", m.Topic, p.cfg.retries+1, lastErr)
}

// sendOnce makes one SDK send, bounded by the send timeout even where the SDK
// does not honour the context (its route lookup uses its own 6 s timeout).
func (p *Producer) sendOnce(ctx context.Context, ms []Message) (SendResult, error) {
	m := ms[0]
	batch := make([]*primitive.Message, 0, len(ms))
	for _, x := range ms {
		msg := primitive.NewMessage(x.Topic, x.Body)
		if x.Tag != "" {
			msg.WithTag(x.Tag)
		}
		if x.Key != "" {
			msg.WithKeys([]string{x.Key})
		}
		if x.ID != "" {
			msg.WithProperty(PropertyMessageID, x.ID)
		}
		batch = append(batch, msg)
	}

	actx, cancel := context.WithTimeout(ctx, p.cfg.sendTimeout)
	defer cancel()
	done := make(chan sendOutcome, 1)
	p.inflight.RLock()
	if p.closed.Load() {
		p.inflight.RUnlock()
		return SendResult{}, fmt.Errorf("send to %s: %w", m.Topic, ErrClosed)
	}
	go func() {
		defer p.inflight.RUnlock()
		res, err := p.p.SendSync(actx, batch...)
		done <- sendOutcome{res: res, err: err}
	}()

	var out sendOutcome
	select {
	case out = <-done:
	case <-actx.Done():
		select {
		case out = <-done: // finished at the same moment: use its answer
		default:
			return SendResult{}, fmt.Errorf("%w: no answer within %s: %w",
				ErrSendUnknown, p.cfg.sendTimeout, actx.Err())
		}
	}
	if out.err != nil {
		if outcomeUnknown(out.err) {
			return SendResult{}, fmt.Errorf("%w: %w", ErrSendUnknown, out.err)
		}
		return SendResult{}, out.err
	}
	r := out.res
	if r == nil {
		return SendResult{}, fmt.Errorf("%w: no send result", ErrSendUnknown)
	}
	res := SendResult{
		MsgID:       r.MsgID,
		OffsetMsgID: r.OffsetMsgID,
		Topic:       m.Topic,
		QueueOffset: r.QueueOffset,
	}
	if r.MessageQueue != nil {
		res.BrokerName = r.MessageQueue.BrokerName
		res.QueueID = r.MessageQueue.QueueId
	}
	switch r.Status {
	case primitive.SendOK:
		res.Status = SendOK
	case primitive.SendFlushDiskTimeout:
		res.Status = SendFlushDiskTimeout
	case primitive.SendFlushSlaveTimeout:
		res.Status = SendFlushSlaveTimeout
	case primitive.SendSlaveNotAvailable:
		res.Status = SendSlaveNotAvailable
	default:
		return SendResult{}, fmt.Errorf("%w: send status %d", ErrSendUnknown, r.Status)
	}
	return res, nil
}

// outcomeUnknown tells whether an SDK send error leaves the message's fate
// open. The request was possibly written when the wait for the answer timed
// out or was cancelled; a failed dial, a missing route, a failed write or a
// broker error code all mean the broker did not store it.
func outcomeUnknown(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return errors.Is(err, rmqerrors.ErrRequestTimeout) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled)
}

// Group returns the producer group name.
func (p *Producer) Group() string { return p.group }

// Close shuts the producer down once the SDK sends in flight have returned
// (each is bounded by the send timeout, or the SDK's own route-lookup
// timeout); sends that start after Close fail with ErrClosed. Calling Close
// again returns nil.
func (p *Producer) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	p.inflight.Lock()
	defer p.inflight.Unlock()
	if err := p.p.Shutdown(); err != nil {
		return fmt.Errorf("shutdown producer %s: %w", p.group, err)
	}
	return nil
}
