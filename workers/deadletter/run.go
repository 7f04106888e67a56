package deadletter

import (
	"context"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/workers"
)

// Run copies the starter group's dead-lettered messages into
// message_quarantine until ctx ends (part "deadletter").
func Run(ctx context.Context, d workers.Deps) error {
	c, err := New(d.Pool, Options{Broker: mq.EndpointOf(d.Config), Group: d.Config.StarterGroup,
		DefaultTopic: d.Config.TopicOrderCreate}, d.Registry, d.Log)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
