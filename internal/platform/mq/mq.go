// Package mq is a thin wrapper around the Apache RocketMQ Go client
// (github.com/apache/rocketmq-client-go/v2, remoting protocol, works with a
// RocketMQ 4.x/5.x name server + broker).
//
// It offers a synchronous Producer whose Send tells a definite failure apart
// from an unknown outcome (ErrSendUnknown), and a push Consumer (clustering
// mode) that hands one message at a time to a handler: a nil error
// acknowledges the message, any other error asks the broker to redeliver it
// later (up to ConsumerOptions.MaxReconsume times, then it goes to the
// group's dead-letter queue).
//
// Every message carries the caller's business id in the user property
// "message_id" (PropertyMessageID), so consumers can de-duplicate: RocketMQ
// delivers at least once.
//
// The SDK logs through logrus to stderr at info level by default; importing
// this package lowers that to "error" unless ROCKETMQ_GO_LOG_LEVEL is set.
package mq

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/seckill/seckill/internal/platform/config"
)

// Endpoint is where a client finds the broker and who it is there: the
// name servers ("host:port") and the ACL 2.0 user whose secret signs every
// request (the broker's authenticationEnabled refuses an unsigned one with
// NO_PERMISSION). An empty AccessKey sends no credentials.
type Endpoint struct {
	NameServers          []string
	AccessKey, SecretKey string
}

// EndpointOf is cfg's broker: SECKILL_ROCKETMQ_NAMESRV, _ACCESS_KEY and
// _SECRET_KEY.
func EndpointOf(cfg config.Config) Endpoint {
	return Endpoint{NameServers: cfg.RocketMQNameServers, AccessKey: cfg.RocketMQAccessKey, SecretKey: cfg.RocketMQSecretKey}
}

// Credentials are e's for the SDK's options (empty: none sent).
func (e Endpoint) Credentials() primitive.Credentials {
	if e.AccessKey == "" {
		return primitive.Credentials{}
	}
	return primitive.Credentials{AccessKey: e.AccessKey, SecretKey: e.SecretKey}
}

// PropertyMessageID is the user property that carries Message.ID / Delivered.ID.
const PropertyMessageID = "message_id"

// PropertyRetryTopic is the system property in which the broker keeps a
// message's original topic once it moved to a retry or dead-letter topic
// (%RETRY%<group>, %DLQ%<group>); see Delivered.Properties.
const PropertyRetryTopic = primitive.PropertyRetryTopic // "RETRY_TOPIC"

// ErrSendUnknown marks a send whose outcome is unknown: the request may have
// reached the broker and been stored, but no answer arrived in time (timeout
// or cancelled context). Callers should record the message as UNKNOWN and
// reconcile, not treat it as failed. Test with errors.Is.
var ErrSendUnknown = errors.New("mq: send outcome unknown")

// ErrClosed is returned by operations on a closed Producer or Consumer.
var ErrClosed = errors.New("mq: closed")

// Message is a message to send.
type Message struct {
	// Topic is the destination topic (must exist: the local broker does not auto-create topics).
	Topic string
	// Key is an optional business key, indexed by the broker (RocketMQ "KEYS").
	Key string
	// Tag is an optional tag consumers can filter on (RocketMQ "TAGS").
	Tag string
	// ID is the business message id, sent as the user property "message_id".
	ID string
	// Body is the payload.
	Body []byte
}

// Delivered is a message handed to a Consumer's handler.
type Delivered struct {
	// Topic is the original topic (also for redeliveries from the retry topic).
	Topic string
	// Key is the message's business key (RocketMQ "KEYS").
	Key string
	// Tag is the message's tag.
	Tag string
	// ID is the business message id (user property "message_id"), empty if the producer set none.
	ID string
	// Body is the payload.
	Body []byte
	// ReconsumeTimes counts earlier deliveries whose handler returned an error (0 on first delivery).
	ReconsumeTimes int
	// BrokerMsgID is RocketMQ's message id (the client-generated unique key the
	// broker indexes), equal to SendResult.MsgID of the send that produced it.
	BrokerMsgID string
	// OffsetMsgID is the broker's storage id (store host + commit log offset);
	// it differs between the original and a redelivered copy.
	OffsetMsgID string
	// QueueID and QueueOffset locate the message in its topic.
	QueueID     int
	QueueOffset int64
	// Properties are the message's properties, user and system ones (a copy):
	// e.g. PropertyRetryTopic, the original topic of a dead-lettered message,
	// whose Topic is the dead-letter topic %DLQ%<group>.
	Properties map[string]string
}

func init() {
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("error")
	}
}

// instanceSeq makes every client instance name unique. The SDK shares one
// client per (IP, instance name) in a process and refuses to create a second
// one with other name servers, so each Producer and Consumer gets its own.
var instanceSeq atomic.Int64

func newInstanceName(kind, group string) string {
	return fmt.Sprintf("%s-%s-%d-%d", kind, group, os.Getpid(), instanceSeq.Add(1))
}

// resolveNameServers checks "host:port" addresses and turns host names into
// IP addresses: the SDK accepts IP literals only.
func resolveNameServers(addrs []string) ([]string, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no name server address")
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("name server address %q: %w", a, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("name server address %q: bad port: %w", a, err)
		}
		if net.ParseIP(host) != nil {
			out = append(out, a)
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("resolve name server host %q: %w", host, err)
		}
		ip := ips[0]
		for _, cand := range ips {
			if cand.To4() != nil {
				ip = cand
				break
			}
		}
		out = append(out, net.JoinHostPort(ip.String(), port))
	}
	return out, nil
}

// backoff returns the pause before retry attempt n (1-based): 50ms, 100ms, 200ms, ... capped at 1s.
func backoff(n int) time.Duration {
	d := 50 * time.Millisecond << (n - 1)
	if d > time.Second || d <= 0 {
		d = time.Second
	}
	return d
}

// SetSDKLogOutput sends the RocketMQ SDK's log lines to the file at path
// instead of stderr (the demo keeps its terminal for progress).
func SetSDKLogOutput(path string) error { return rlog.SetOutputPath(path) }
