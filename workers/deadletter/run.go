package deadletter

import (
	"context"

	"github.com/seckill/seckill/workers"
)

// Run copies the starter group's dead-lettered messages into
// message_quarantine until ctx ends (part "deadletter").
func Run(ctx context.Context, d workers.Deps) error {
	c, err := New(d.Pool, Options{NameServers: d.Config.RocketMQNameServers, Group: d.Config.StarterGroup,
		DefaultTopic: d.Config.TopicOrderCreate}, d.Registry, d.Log)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}
