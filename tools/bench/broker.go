package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/reservation"
)

// orderBenchGroup is the consumer group of the broker leg: one group for
// every run (each run reads its own topic from the first offset).
const orderBenchGroup = "seckill-bench-order"

// brokerLeg sends the backlog's messages with the gateway's send code
// (reservation.Send) to a topic of this run, created on the broker for the
// leg and deleted after it, then consumes them back with the project's
// consumer (mq.NewConsumer, as the saga starter does) and a handler that
// only counts. A topic of its own is the only way a consumer reads just
// this run's messages: a new group on a shared topic starts at the topic's
// first offset (the whole history), whatever the start position asked for.
func (e *orderEnv) brokerLeg(ctx context.Context) error {
	n := len(e.backlog)
	topic := "seckill_bench_order_" + e.runID
	leg := &BrokerLeg{Messages: n, Producers: e.o.Concurrency, ConsumerConcurrency: e.cfg.ConsumerConcurrency,
		Group: orderBenchGroup + " on topic " + topic}
	e.report.Broker = leg
	deleteTopic, err := e.createTopic(ctx, topic)
	if err != nil {
		return err
	}
	defer deleteTopic()
	if err := e.awaitWritable(ctx, topic); err != nil {
		return err
	}
	if err := e.produce(ctx, topic, leg); err != nil {
		return err
	}
	e.progress("broker: sent %d in %.1f s (%.0f/s); consuming them back (group %s)", n, leg.ProduceS, leg.ProducePS, orderBenchGroup)
	return e.consume(ctx, topic, leg)
}

// createTopic creates the leg's topic on --broker-addr and returns the
// function that deletes it.
func (e *orderEnv) createTopic(ctx context.Context, topic string) (func(), error) {
	ep := mq.EndpointOf(e.cfg)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(ep.NameServers)), admin.WithCredentials(ep.Credentials()))
	if err != nil {
		return nil, fmt.Errorf("broker: admin client: %w", err)
	}
	cctx, c := context.WithTimeout(ctx, 15*time.Second)
	// The SDK's admin client signs requests (ACL) only once this call has
	// registered its interceptor; it also proves the credentials, as
	// CreateTopic ignores the broker's answer.
	if _, err := adm.GetAllSubscriptionGroup(cctx, e.o.BrokerAddr, 5*time.Second); err != nil {
		c()
		_ = adm.Close()
		return nil, fmt.Errorf("broker: admin request to %s as %q (SECKILL_ROCKETMQ_ACCESS_KEY): %w", e.o.BrokerAddr, ep.AccessKey, err)
	}
	err = adm.CreateTopic(cctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(e.o.BrokerAddr),
		admin.WithReadQueueNums(8), admin.WithWriteQueueNums(8))
	c()
	if err != nil {
		_ = adm.Close()
		return nil, fmt.Errorf("broker: create topic %s on %s (--broker-addr, or --skip-broker): %w", topic, e.o.BrokerAddr, err)
	}
	return func() {
		defer adm.Close()
		dctx, c := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer c()
		if err := adm.DeleteTopic(dctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(e.o.BrokerAddr),
			admin.WithNameSrvAddr(e.cfg.RocketMQNameServers)); err != nil {
			e.progress("broker: delete topic %s: %v (delete it with mqadmin deleteTopic)", topic, err)
			return
		}
		e.progress("broker: topic %s deleted", topic)
	}, nil
}

// awaitWritable probes until the new topic's route reaches the producer.
func (e *orderEnv) awaitWritable(ctx context.Context, topic string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := probeTopic(ctx, e.conns.Producer, topic, 5*time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("broker: topic %s never became writable: %w", topic, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// produce sends the backlog's messages to topic with the gateway's send
// code from --concurrency goroutines.
func (e *orderEnv) produce(ctx context.Context, topic string, leg *BrokerLeg) error {
	n := len(e.backlog)
	e.progress("broker: sending %d ORDER_CREATE_REQUESTED to %s from %d goroutines", n, topic, e.o.Concurrency)
	w := StartCPUWindow()
	t0 := time.Now()
	var next, failed atomic.Int64
	var sample atomic.Value
	var wg sync.WaitGroup
	for range e.o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if outcome, text := reservation.Send(ctx, e.conns.Producer, topic, e.backlog[i]); outcome != reservation.OutcomePublished {
					failed.Add(1)
					sample.Store(outcome + ": " + text)
				}
			}
		}()
	}
	wg.Wait()
	leg.ProduceS = time.Since(t0).Seconds()
	leg.ProducePS = float64(n) / leg.ProduceS
	leg.Produce = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderBrokerPath)
	if f := failed.Load(); f > 0 {
		leg.Outcome = fmt.Sprintf("%d of %d sends failed", f, n)
		return fmt.Errorf("broker: %d of %d sends failed, e.g. %v", f, n, sample.Load())
	}
	return ctx.Err()
}

// consumeCount is what the counting handler of the broker leg saw.
type consumeCount struct {
	want              map[string]int // message id -> backlog index
	seen              []atomic.Bool
	got, dup, foreign atomic.Int64
	all               chan struct{} // closed when every message arrived
	allOnce           sync.Once
}

func (c *consumeCount) handle(_ context.Context, d mq.Delivered) error {
	i, ok := c.want[d.ID]
	switch {
	case !ok:
		c.foreign.Add(1) // the probe
	case c.seen[i].Swap(true):
		c.dup.Add(1)
	default:
		if c.got.Add(1) == int64(len(c.seen)) {
			c.allOnce.Do(func() { close(c.all) })
		}
	}
	return nil
}

// consume reads the messages back with the project's consumer and a handler
// that only counts, until every one arrived (or nothing did for a minute).
func (e *orderEnv) consume(ctx context.Context, topic string, leg *BrokerLeg) error {
	n := len(e.backlog)
	cc := &consumeCount{want: make(map[string]int, n), seen: make([]atomic.Bool, n), all: make(chan struct{})}
	for i, f := range e.backlog {
		cc.want[f.MessageID.String()] = i
	}
	cons, err := mq.NewConsumer(mq.EndpointOf(e.cfg), orderBenchGroup, topic, cc.handle,
		mq.ConsumerOptions{Concurrency: e.cfg.ConsumerConcurrency})
	if err != nil {
		return fmt.Errorf("broker: consumer: %w", err)
	}
	w := StartCPUWindow()
	t1 := time.Now()
	if err := cons.Start(); err != nil {
		return fmt.Errorf("broker: start consumer: %w", err)
	}
	defer func() {
		if err := cons.Close(); err != nil {
			e.progress("broker: consumer close: %v", err)
		}
	}()
	if err := awaitAll(ctx, cc, leg, n); err != nil {
		return err
	}
	leg.ConsumeS = time.Since(t1).Seconds()
	leg.ConsumePS = float64(n) / leg.ConsumeS
	leg.Consume = w.Stop(int64(n), e.ncpu, benchSelf, nil, orderBrokerPath)
	leg.Outcome = fmt.Sprintf("sent %d (all PUBLISHED), received %d once each (%d redeliveries, %d probe); the consume time includes the consumer's start and first rebalance",
		n, cc.got.Load(), cc.dup.Load(), cc.foreign.Load())
	e.progress("broker: consumed %d in %.1f s (%.0f/s)", n, leg.ConsumeS, leg.ConsumePS)
	return nil
}

// awaitAll waits until every message arrived; a minute without progress fails.
func awaitAll(ctx context.Context, cc *consumeCount, leg *BrokerLeg, n int) error {
	last, lastAt := int64(0), time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-cc.all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if g := cc.got.Load(); g != last {
				last, lastAt = g, time.Now()
			} else if time.Since(lastAt) > time.Minute {
				leg.Outcome = fmt.Sprintf("consumed %d of %d, then nothing for a minute", g, n)
				return fmt.Errorf("broker: %s", leg.Outcome)
			}
		}
	}
}
