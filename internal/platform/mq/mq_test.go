package mq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
)

func TestOutcomeUnknown(t *testing.T) {
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"sdk request timeout", rmqerrors.ErrRequestTimeout, true},
		{"wrapped request timeout", fmt.Errorf("x: %w", rmqerrors.ErrRequestTimeout), true},
		{"context deadline", context.DeadlineExceeded, true},
		{"context cancelled", context.Canceled, true},
		{"dial timeout", dialTimeout, false},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{"write failed", &net.OpError{Op: "write", Net: "tcp", Err: errors.New("broken pipe")}, false},
		{"no route", errors.New("the topic=t route info not found"), false},
		{"broker code", errors.New("CODE: 2, DESC: [TIMEOUT_CLEAN_QUEUE]broker busy"), false},
	}
	for _, c := range cases {
		if got := outcomeUnknown(c.err); got != c.want {
			t.Errorf("%s: outcomeUnknown(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestResolveNameServers(t *testing.T) {
	got, err := resolveNameServers([]string{"127.0.0.1:9876", "localhost:9877"})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if got[0] != "127.0.0.1:9876" || (got[1] != "127.0.0.1:9877" && got[1] != "[::1]:9877") {
		t.Errorf("resolved %v", got)
	}
	for _, bad := range [][]string{nil, {"127.0.0.1"}, {"127.0.0.1:x"}, {"127.0.0.1:99999"}} {
		if _, err := resolveNameServers(bad); err == nil {
			t.Errorf("resolveNameServers(%q) succeeded", bad)
		}
	}
}

func TestSendValidation(t *testing.T) {
	p, err := NewProducer(Endpoint{NameServers: []string{"127.0.0.1:9876"}}, "seckill_unit_"+runID())
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if _, err := p.Send(context.Background(), Message{Body: []byte("x")}); err == nil {
		t.Error("send without topic succeeded")
	}
	if _, err := p.Send(context.Background(), Message{Topic: "t"}); err == nil {
		t.Error("send without body succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := p.Send(context.Background(), Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := NewProducer(Endpoint{NameServers: []string{"127.0.0.1:9876"}}, ""); err == nil {
		t.Error("producer without group created")
	}
	if _, err := NewConsumer(Endpoint{NameServers: []string{"127.0.0.1:9876"}}, "g", "t", nil, ConsumerOptions{}); err == nil {
		t.Error("consumer without handler created")
	}
	if _, err := NewConsumer(Endpoint{NameServers: []string{"127.0.0.1:9876"}}, "g", "t",
		func(context.Context, Delivered) error { return nil }, ConsumerOptions{RetryDelayLevel: 19}); err == nil {
		t.Error("consumer with retry delay level 19 created")
	}
}

// The rebalance mutex Close holds around the SDK's Shutdown is found in the
// SDK version go.mod pins (shutdown.go); a new SDK layout fails here rather
// than silently bringing the shutdown race back.
func TestRebalanceLockIsFound(t *testing.T) {
	c, err := NewConsumer(Endpoint{NameServers: []string{"127.0.0.1:1"}}, "lock-test", "lock-test-topic",
		func(context.Context, Delivered) error { return nil }, ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mu := rebalanceLock(c.pc)
	if mu == nil {
		t.Fatal("the SDK client's rbMutex was not found behind the push consumer")
	}
	if !mu.TryLock() {
		t.Fatal("rbMutex held by nobody should be free")
	}
	mu.Unlock()
	if rebalanceLock(nil) != nil || rebalanceLock(struct{}{}) != nil {
		t.Fatal("rebalanceLock found a mutex where there is none")
	}
}
