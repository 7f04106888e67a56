package mq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
)

// Integration tests run against a real name server + broker
// (scripts/stack/rocketmq.sh: rocketmq_up) when SECKILL_INTEGRATION is set;
// with SECKILL_INTEGRATION=1 an unreachable name server is a failure, not a
// skip. SECKILL_ROCKETMQ_NAMESRV overrides the name server (default
// 127.0.0.1:9876). The unreachable-name-server tests need no broker and
// always run.

const smokeTopic = "seckill_smoke"

// integrationBroker is the stack's broker as the configuration names it
// (SECKILL_ROCKETMQ_NAMESRV, _ACCESS_KEY, _SECRET_KEY).
func integrationBroker(t *testing.T) Endpoint {
	t.Helper()
	if os.Getenv("SECKILL_INTEGRATION") == "" {
		t.Skip("SECKILL_INTEGRATION not set: skipping RocketMQ integration test")
	}
	if os.Getenv("SECKILL_ENV") == "" {
		t.Setenv("SECKILL_ENV", config.EnvDevelopment) // the local stack's secrets are the development ones
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	ep := EndpointOf(cfg)
	conn, err := net.DialTimeout("tcp", ep.NameServers[0], 2*time.Second)
	if err != nil {
		t.Fatalf("RocketMQ name server %s unreachable (start it with make up): %v", ep.NameServers[0], err)
	}
	_ = conn.Close()
	return ep
}

// runID is unique per test run, usable in group names and tags.
func runID() string {
	return fmt.Sprintf("%d_%d", time.Now().UnixNano(), os.Getpid())
}

type seenSet struct {
	mu     sync.Mutex
	want   map[string]bool
	got    map[string]Delivered
	dups   int
	done   chan struct{}
	closed bool
}

func newSeenSet(ids []string) *seenSet {
	s := &seenSet{want: map[string]bool{}, got: map[string]Delivered{}, done: make(chan struct{})}
	for _, id := range ids {
		s.want[id] = true
	}
	return s
}

func (s *seenSet) add(d Delivered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.want[d.ID] {
		return
	}
	if _, ok := s.got[d.ID]; ok {
		s.dups++ // at-least-once: a redelivery is allowed
		return
	}
	s.got[d.ID] = d
	if len(s.got) == len(s.want) && !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (s *seenSet) missing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.want {
		if _, ok := s.got[id]; !ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func TestProduceConsumeRoundTrip(t *testing.T) {
	ep := integrationBroker(t)
	const n = 20
	run := runID()
	tag := "it_" + run
	group := "seckill_it_" + run

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("msg-%s-%02d", run, i)
	}
	seen := newSeenSet(ids)

	c, err := NewConsumer(ep, group, smokeTopic, func(_ context.Context, d Delivered) error {
		seen.add(d)
		return nil
	}, ConsumerOptions{Concurrency: 4, MaxReconsume: 3, Tags: tag})
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close consumer: %v", err)
		}
	})

	p, err := NewProducer(ep, "seckill_it_producer_"+run, WithSendTimeout(5*time.Second))
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close producer: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sent := map[string]SendResult{}
	for i, id := range ids {
		res, err := p.Send(ctx, Message{
			Topic: smokeTopic,
			Key:   fmt.Sprintf("key-%02d", i),
			Tag:   tag,
			ID:    id,
			Body:  []byte("body " + id),
		})
		if err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
		if res.MsgID == "" || res.Status != SendOK || res.Topic != smokeTopic {
			t.Fatalf("send %s: unexpected result %+v", id, res)
		}
		sent[id] = res
	}
	t.Logf("sent %d messages in %s (since consumer start)", n, time.Since(start).Round(time.Millisecond))

	select {
	case <-seen.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("not all messages consumed after 45s; missing %v", seen.missing())
	}
	t.Logf("consumed all %d messages %s after consumer start (%d duplicate deliveries)",
		n, time.Since(start).Round(time.Millisecond), seen.dups)

	seen.mu.Lock()
	defer seen.mu.Unlock()
	for i, id := range ids {
		d := seen.got[id]
		if d.Topic != smokeTopic || d.Tag != tag || d.Key != fmt.Sprintf("key-%02d", i) {
			t.Errorf("%s: topic/tag/key = %q/%q/%q", id, d.Topic, d.Tag, d.Key)
		}
		if !bytes.Equal(d.Body, []byte("body "+id)) {
			t.Errorf("%s: body %q", id, d.Body)
		}
		if d.BrokerMsgID != sent[id].MsgID {
			t.Errorf("%s: BrokerMsgID %q, send result MsgID %q", id, d.BrokerMsgID, sent[id].MsgID)
		}
		if d.ReconsumeTimes != 0 {
			t.Errorf("%s: ReconsumeTimes %d on first delivery", id, d.ReconsumeTimes)
		}
	}
}

// A handler error or panic makes the broker redeliver the message.
func TestHandlerErrorIsRedelivered(t *testing.T) {
	ep := integrationBroker(t)
	run := runID()
	tag := "rt_" + run
	group := "seckill_it_rt_" + run

	errID, panicID := "rt-err-"+run, "rt-panic-"+run
	var mu sync.Mutex
	first := map[string]Delivered{}
	again := map[string]Delivered{}
	done := make(chan struct{})
	c, err := NewConsumer(ep, group, smokeTopic, func(_ context.Context, d Delivered) error {
		mu.Lock()
		defer mu.Unlock()
		if d.ReconsumeTimes == 0 {
			first[d.ID] = d
			if d.ID == panicID {
				panic("handler panic on first delivery")
			}
			return errors.New("fail on first delivery")
		}
		if _, ok := again[d.ID]; !ok {
			again[d.ID] = d
			if len(again) == 2 {
				close(done)
			}
		}
		return nil
	}, ConsumerOptions{Concurrency: 2, MaxReconsume: 2, Tags: tag, RetryDelayLevel: 1})
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("start consumer: %v", err)
	}
	defer c.Close()

	p, err := NewProducer(ep, "seckill_it_rt_producer_"+run)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer p.Close()
	start := time.Now()
	for _, id := range []string{errID, panicID} {
		if _, err := p.Send(context.Background(), Message{Topic: smokeTopic, Tag: tag, ID: id, Body: []byte(id)}); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no redelivery within 30s: first deliveries %d, redeliveries %d", len(first), len(again))
	}
	t.Logf("both messages redelivered %s after sending", time.Since(start).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{errID, panicID} {
		f, r := first[id], again[id]
		if r.ReconsumeTimes != 1 || r.Topic != smokeTopic || string(r.Body) != id {
			t.Errorf("%s: redelivery %+v", id, r)
		}
		if r.BrokerMsgID != f.BrokerMsgID {
			t.Errorf("%s: redelivery BrokerMsgID %q, first %q", id, r.BrokerMsgID, f.BrokerMsgID)
		}
	}
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestSendUnreachableNameServerFailsFast(t *testing.T) {
	p, err := NewProducer(Endpoint{NameServers: []string{deadAddr(t)}}, "seckill_it_dead_ns_"+runID(), WithSendTimeout(2*time.Second))
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer p.Close()

	start := time.Now()
	_, err = p.Send(context.Background(), Message{Topic: smokeTopic, ID: "x", Body: []byte("x")})
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("send to an unreachable name server succeeded")
	}
	if errors.Is(err, ErrSendUnknown) {
		t.Errorf("connection refused should be a definite failure, got %v", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("send took %s", elapsed)
	}
	t.Logf("error after %s: %v", elapsed.Round(time.Millisecond), err)
}

// A name server that accepts connections but never answers: Send must give up
// after the send timeout and report the outcome as unknown, not hang.
func TestSendSilentNameServerTimesOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})

	p, err := NewProducer(Endpoint{NameServers: []string{l.Addr().String()}}, "seckill_it_silent_ns_"+runID(), WithSendTimeout(time.Second))
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	defer p.Close()

	start := time.Now()
	_, err = p.Send(context.Background(), Message{Topic: smokeTopic, ID: "x", Body: []byte("x")})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrSendUnknown) {
		t.Fatalf("want ErrSendUnknown, got %v", err)
	}
	if elapsed > 2500*time.Millisecond {
		t.Errorf("send took %s with a 1s send timeout", elapsed)
	}
	t.Logf("error after %s: %v", elapsed.Round(time.Millisecond), err)
}

func TestConsumerStartUnreachableNameServer(t *testing.T) {
	c, err := NewConsumer(Endpoint{NameServers: []string{deadAddr(t)}}, "seckill_it_dead_ns_"+runID(), smokeTopic,
		func(context.Context, Delivered) error { return nil }, ConsumerOptions{Concurrency: 1})
	if err != nil {
		t.Fatalf("new consumer: %v", err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.Start(); err == nil {
		t.Fatal("start with an unreachable name server succeeded")
	} else {
		t.Logf("error after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("start took %s", elapsed)
	}
}

// The stack's broker authenticates (ACL 2.0): a producer that signs with the
// configured user sends, one without credentials or with another secret is
// refused, and nothing of theirs is stored.
func TestTheBrokerRefusesAnUnsignedOrMissignedClient(t *testing.T) {
	ep := integrationBroker(t)
	run := runID()
	ok, err := NewProducer(ep, "seckill_it_acl_ok_"+run, WithSendTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if _, err := ok.Send(context.Background(), Message{Topic: smokeTopic, Tag: "acl_" + run, ID: "acl-ok-" + run, Body: []byte("ok")}); err != nil {
		t.Fatalf("send as %q: %v", ep.AccessKey, err)
	}
	for name, c := range map[string]struct {
		ep   Endpoint
		want string
	}{
		"no credentials": {Endpoint{NameServers: ep.NameServers}, "username cannot be null"},
		"wrong secret":   {Endpoint{NameServers: ep.NameServers, AccessKey: ep.AccessKey, SecretKey: ep.SecretKey + "-not-it"}, "check signature failed"},
	} {
		p, err := NewProducer(c.ep, "seckill_it_acl_bad_"+run, WithSendTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(context.Background(), Message{Topic: smokeTopic, Tag: "acl_" + run, ID: "acl-bad-" + run, Body: []byte(name)})
		p.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Send = %v, want a refusal saying %q", name, err, c.want)
		}
	}
}
