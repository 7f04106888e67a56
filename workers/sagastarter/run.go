package sagastarter

import (
	"context"
	"errors"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/workers"
)

// Run consumes ORDER_CREATE_REQUESTED and starts a saga per reservation
// until ctx ends (part "starter").
func Run(ctx context.Context, d workers.Deps) error {
	if d.Temporal == nil {
		return errors.New("sagastarter: needs a Temporal client")
	}
	cfg := d.Config
	if d.IDs == nil {
		return errors.New("sagastarter: needs the ID secrets (SECKILL_ID_SECRETS) to verify messages")
	}
	st, err := New(d.Pool, d.Temporal, cfg.TemporalTaskQueue, d.IDs, d.Registry, d.Log)
	if err != nil {
		return err
	}
	if d.Saga != nil {
		st.PayloadConflicts = d.Saga.InboxPayloadConflict
	}
	st.Failpoints = d.Failpoints
	cons, err := mq.NewConsumer(mq.EndpointOf(cfg), cfg.StarterGroup, cfg.TopicOrderCreate, st.Handle,
		mq.ConsumerOptions{Concurrency: cfg.ConsumerConcurrency, FromLatest: cfg.StarterFromLatest})
	if err != nil {
		return err
	}
	if err := cons.Start(); err != nil {
		return err
	}
	defer cons.Close()
	<-ctx.Done()
	return nil
}
