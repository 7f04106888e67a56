package refundrelay

import (
	"context"
	"errors"

	"github.com/seckill/seckill/workers"
)

// Run starts the refunds owed (refund_task) until they are done, until ctx
// ends (part "refunds").
func Run(ctx context.Context, d workers.Deps) error {
	if d.Temporal == nil {
		return errors.New("refundrelay: needs a Temporal client")
	}
	relay, err := New(d.Pool, d.Temporal, Options{TaskQueue: d.Config.TemporalTaskQueue}, d.Registry, d.Log)
	if err != nil {
		return err
	}
	return relay.Run(ctx)
}
