package senddue

import (
	"context"
	"time"

	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/workers"
)

// Run scans the send_due queues until ctx ends (part "senddue").
func Run(ctx context.Context, d workers.Deps) error {
	cfg := d.Config
	route, err := mq.NewRouteWatch(mq.EndpointOf(cfg), cfg.TopicOrderCreate)
	if err != nil {
		return err
	}
	scan, err := New(d.Redis, d.Producer, Options{Topic: cfg.TopicOrderCreate, Lease: cfg.SendLease,
		SendTimeout: cfg.MQSendTimeout, MaxBackoff: cfg.SendMaxBackoff, RecheckAfter: cfg.SendRecheckAfter,
		Interval: 200 * time.Millisecond, Brokers: route.Brokers}, d.Reservation, d.Log)
	if err != nil {
		return err
	}
	return scan.Run(ctx)
}
