package inventory

import (
	"context"
	"time"

	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
)

// ProjectOrderCreated marks the Redis reservation ORDER_CREATED and moves its
// unit open_reserved → committed, once (lua/order_created.lua). A missing or
// conflicting Redis reservation changes nothing and is reported: PostgreSQL
// holds the order; reconciliation rebuilds the projection.
func (s *Store) ProjectOrderCreated(ctx context.Context, in steps.ProjectionInput) (steps.ProjectionResult, error) {
	k := lua.Keys{ActivityID: in.ActivityID, SKUID: in.SKUID, Bucket: in.Bucket}
	reply, err := lua.OrderCreated(ctx, s.rdb, k, lua.OrderCreatedArgs{ReservationID: in.ReservationID.String(),
		OrderID: in.OrderID.String()})
	if err != nil {
		return steps.ProjectionResult{}, err
	}
	res := steps.ProjectionResult{Code: int64(reply.Code), Text: reply.Text}
	if res.Code < 0 {
		s.log.ErrorContext(ctx, "projection.order_created_conflict", "reservation_id", in.ReservationID, "order_id", in.OrderID,
			"lua_code", res.Code, "result", res.Text)
	}
	return res, nil
}

// ReleaseRedis gives a cancelled order's unit back to Redis stock once
// (lua/release.lua). Only after PostgreSQL durably cancelled the order.
//
// A Redis reservation still RESERVED lost its order_created.lua write: its
// unit is still open_reserved and it is still in send_due. The order is
// projected first (the standard move RESERVED → ORDER_CREATED, open_reserved →
// committed, out of send_due), then released (ORDER_CREATED → CANCELLED,
// committed → available): both scripts are idempotent and the release marker
// keeps the unit's return at most once.
func (s *Store) ReleaseRedis(ctx context.Context, in steps.ReleaseInput) (steps.ProjectionResult, error) {
	res, err := s.release(ctx, in)
	if err != nil || !stillReserved(res) {
		return res, err
	}
	p, err := s.ProjectOrderCreated(ctx, steps.ProjectionInput(in))
	if err != nil {
		return steps.ProjectionResult{}, err
	}
	if p.Code < 0 {
		return steps.ProjectionResult{Code: p.Code, Text: "projection before release: " + p.Text}, nil
	}
	s.log.InfoContext(ctx, "release.projected_first", "reservation_id", in.ReservationID, "order_id", in.OrderID, "result", p.Text)
	return s.release(ctx, in)
}

// releaseStillReserved is release.lua's answer for a reservation whose
// projection never ran.
const releaseStillReserved = "INVALID_STATUS:RESERVED"

// stillReserved reports release.lua's answer for a reservation whose
// projection never ran: the order is projected first, then released.
func stillReserved(res steps.ProjectionResult) bool {
	return res.Code == int64(lua.ReleaseInvalidStatus) && res.Text == releaseStillReserved
}

func (s *Store) release(ctx context.Context, in steps.ReleaseInput) (steps.ProjectionResult, error) {
	k := lua.Keys{ActivityID: in.ActivityID, SKUID: in.SKUID, Bucket: in.Bucket}
	rid := in.ReservationID.String()
	reply, err := lua.Release(ctx, s.rdb, k, lua.ReleaseArgs{ReservationID: rid, ReleaseID: "RELEASE:" + in.OrderID.String(),
		NowMS: time.Now().UnixMilli(), TTL: s.terminalTTL})
	if err != nil {
		return steps.ProjectionResult{}, err
	}
	res := steps.ProjectionResult{Code: int64(reply.Code), Text: reply.Text}
	if res.Code < 0 && res.Text != releaseStillReserved {
		s.log.ErrorContext(ctx, "release.redis_not_applied", "reservation_id", rid, "order_id", in.OrderID, "lua_code", res.Code, "result", res.Text)
	}
	return res, nil
}
