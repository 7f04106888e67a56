package mq

import (
	"context"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// RouteWatch reads from the name servers which broker groups hold a topic's
// queues. A group that leaves the route (its master gone for good) may hold
// messages no consumer will read until it is back: the send-due scanner
// sends its reservations again (workers/senddue, docs/scale.md#failover).
type RouteWatch struct {
	ep    Endpoint
	addrs []string
	topic string
}

// NewRouteWatch returns a watch of topic's route on ep's name servers (which
// check no credentials).
func NewRouteWatch(ep Endpoint, topic string) (*RouteWatch, error) {
	addrs, err := resolveNameServers(ep.NameServers)
	if err != nil {
		return nil, fmt.Errorf("route watch of %s: %w", topic, err)
	}
	return &RouteWatch{ep: ep, addrs: addrs, topic: topic}, nil
}

// Brokers is the set of broker group names that hold the topic's queues now.
// Each call asks the name servers afresh: the SDK's admin client keeps the
// first route it read, so the watch opens one per call and closes it.
func (w *RouteWatch) Brokers(ctx context.Context) (map[string]bool, error) {
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(w.addrs)), admin.WithCredentials(w.ep.Credentials()))
	if err != nil {
		return nil, fmt.Errorf("route of %s: %w", w.topic, err)
	}
	defer adm.Close() //nolint:errcheck // nothing to do about it
	qs, err := adm.FetchPublishMessageQueues(ctx, w.topic)
	if err != nil {
		return nil, fmt.Errorf("route of %s: %w", w.topic, err)
	}
	out := make(map[string]bool, 2)
	for _, q := range qs {
		out[q.BrokerName] = true
	}
	return out, nil
}
