package mq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// blockingSDK answers a send only once release is closed and records whether
// Shutdown ran while a send was still inside the SDK.
type blockingSDK struct {
	entered  chan struct{}
	release  chan struct{}
	inside   atomic.Int32
	shutdown atomic.Bool
	overlap  atomic.Bool
}

func (b *blockingSDK) Start() error { return nil }

func (b *blockingSDK) Shutdown() error {
	if b.inside.Load() > 0 {
		b.overlap.Store(true)
	}
	b.shutdown.Store(true)
	return nil
}

func (b *blockingSDK) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	b.inside.Add(1)
	defer b.inside.Add(-1)
	close(b.entered)
	<-b.release
	return &primitive.SendResult{Status: primitive.SendOK, MsgID: "m1"}, nil
}

func TestCloseWaitsForTheSendInsideTheSDK(t *testing.T) {
	sdk := &blockingSDK{entered: make(chan struct{}), release: make(chan struct{})}
	p := &Producer{p: sdk, group: "g", cfg: producerConfig{sendTimeout: 50 * time.Millisecond}}
	sent := make(chan error, 1)
	go func() {
		_, err := p.Send(context.Background(), Message{Topic: "t", Body: []byte("x")})
		sent <- err
	}()
	<-sdk.entered
	// the send's own timeout passes: its outcome is unknown, the SDK call goes on
	if err := <-sent; !errors.Is(err, ErrSendUnknown) {
		t.Fatalf("send past its timeout = %v, want ErrSendUnknown", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a send was inside the SDK", err)
	case <-time.After(100 * time.Millisecond):
	}
	if sdk.shutdown.Load() {
		t.Fatal("the SDK was shut down under a send in flight")
	}
	close(sdk.release)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	if !sdk.shutdown.Load() || sdk.overlap.Load() {
		t.Fatalf("shutdown ran = %v, overlapping a send = %v; want after the send returned", sdk.shutdown.Load(), sdk.overlap.Load())
	}
	if _, err := p.Send(context.Background(), Message{Topic: "t", Body: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after Close = %v, want ErrClosed", err)
	}
}
