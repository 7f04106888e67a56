package outboxrelay

import (
	"context"

	"github.com/seckill/seckill/workers"
)

// Run relays event_outbox to RocketMQ until ctx ends (part "outbox").
func Run(ctx context.Context, d workers.Deps) error {
	relay, err := New(d.Pool, d.Producer, Options{Topic: d.Config.TopicEvents, SendTimeout: d.Config.MQSendTimeout}, d.Registry, d.Log)
	if err != nil {
		return err
	}
	return relay.Run(ctx)
}
