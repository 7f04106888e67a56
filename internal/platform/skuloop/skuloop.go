// Package skuloop keeps one failing SKU from stalling a worker loop that
// walks every SKU (the send-due scanner, the rebalancer, the reconciler):
// with one Redis Cluster master down, the SKUs of its slots fail and every
// other SKU must still be served. A loop records each SKU it failed on in
// its Pass (counted per SKU in seckill_loop_sku_failures_total, logged in
// one line "loop.sku_failed"), goes on with the next SKU, and returns
// Pass.Err at the end: an *Error naming every SKU that failed.
//
// A Redis node that does not answer (connection refused, a timeout) costs
// each command its dial attempts and retries, seconds on a cluster client;
// once one SKU of a pass found a node unreachable, Pass.Unreachable fails the
// pass's later SKUs on that node at once, so a pass waits once per dead node
// rather than once per SKU on it. The next pass tries the node again.
package skuloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/redisx"
)

// Failure is one SKU (or one bucket of it) a pass could not handle.
type Failure struct {
	ActivityID int64
	SKUID      int64
	Bucket     int
	Err        error
}

// Object names the SKU as the reconciler's reports do: "sku:activity:sku".
func (f Failure) Object() string { return fmt.Sprintf("sku:%d:%d", f.ActivityID, f.SKUID) }

func (f Failure) Error() string {
	if f.Bucket > 0 {
		return fmt.Sprintf("sku %d:%d bucket %d: %v", f.ActivityID, f.SKUID, f.Bucket, f.Err)
	}
	return fmt.Sprintf("sku %d:%d: %v", f.ActivityID, f.SKUID, f.Err)
}

func (f Failure) Unwrap() error { return f.Err }

// Error is the error of a pass that went through every SKU and failed on
// some of them (each already counted and logged).
type Error struct {
	Loop     string
	Failures []Failure
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = f.Error()
	}
	return fmt.Sprintf("%s: %d SKUs failed: %s", e.Loop, len(e.Failures), strings.Join(parts, "; "))
}

// Unwrap gives each SKU's error (errors.Is sees through them).
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f
	}
	return out
}

// Only reports whether err is an *Error and nothing else: a pass whose only
// failures are SKUs, each logged already.
func Only(err error) bool {
	var e *Error
	return errors.As(err, &e) && err == error(e)
}

// Pass collects the failures of one pass of loop over rdb; m, log and rdb
// are required. A Pass is used by one goroutine.
type Pass struct {
	loop   string
	m      *metrics.SKUFailures
	log    *slog.Logger
	rdb    redis.Cmdable
	failed []Failure
	down   map[string]error // node address → the error that found it unreachable
}

// NewPass starts a pass of loop.
func NewPass(loop string, m *metrics.SKUFailures, log *slog.Logger, rdb redis.Cmdable) *Pass {
	return &Pass{loop: loop, m: m, log: log, rdb: rdb, down: map[string]error{}}
}

// Fail records that the pass failed on (activityID, skuID, bucket): counted,
// logged in one line, and kept for Err. An error that says a node could not
// be reached (a *net.OpError: refused, reset, timed out) marks that node
// unreachable for the rest of the pass; a Redis reply (WRONGTYPE,
// CLUSTERDOWN, ...) does not.
func (p *Pass) Fail(activityID, skuID int64, bucket int, err error) {
	p.m.Inc(activityID, skuID)
	p.log.Warn("loop.sku_failed", "loop", p.loop, "activity_id", activityID, "sku_id", skuID, "bucket", bucket, "error", err)
	p.failed = append(p.failed, Failure{ActivityID: activityID, SKUID: skuID, Bucket: bucket, Err: err})
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Addr != nil {
		p.down[oe.Addr.String()] = oe
	}
}

// Unreachable is non-nil when the node holding one of keys (their cluster
// slot's master; the one Redis otherwise) was found unreachable earlier in
// this pass: the loop then fails the SKU with it (Fail) without trying.
func (p *Pass) Unreachable(ctx context.Context, keys ...string) error {
	if len(p.down) == 0 {
		return nil
	}
	for _, key := range keys {
		n, err := redisx.NodeFor(ctx, p.rdb, key)
		if err != nil {
			continue
		}
		if cause, ok := p.down[n.Options().Addr]; ok {
			return fmt.Errorf("not tried: Redis %s was unreachable earlier in this pass: %w", n.Options().Addr, cause)
		}
	}
	return nil
}

// Err is nil when no SKU failed, else an *Error naming each.
func (p *Pass) Err() error {
	if len(p.failed) == 0 {
		return nil
	}
	return &Error{Loop: p.loop, Failures: p.failed}
}
