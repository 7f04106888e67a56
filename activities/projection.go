package activities

import (
	"context"

	"github.com/google/uuid"

	"github.com/seckill/seckill/lua"
)

// ProjectionInput names a created order to project onto Redis.
type ProjectionInput struct {
	ReservationID uuid.UUID
	OrderID       uuid.UUID
	ActivityID    int64
	SKUID         int64
}

// ProjectionResult is order_created.lua's answer.
type ProjectionResult struct {
	Code int64
	Text string
}

// ProjectOrderCreated marks the Redis reservation ORDER_CREATED and moves its
// unit open_reserved → committed, once (lua/order_created.lua). A missing or
// conflicting Redis reservation changes nothing and is reported: PostgreSQL
// holds the order; reconciliation rebuilds the projection.
func (a *Activities) ProjectOrderCreated(ctx context.Context, in ProjectionInput) (ProjectionResult, error) {
	k := lua.Keys{ActivityID: in.ActivityID, SKUID: in.SKUID}
	reply, err := lua.OrderCreated(ctx, a.rdb, k, lua.OrderCreatedArgs{ReservationID: in.ReservationID.String(),
		OrderID: in.OrderID.String()})
	if err != nil {
		return ProjectionResult{}, err
	}
	res := ProjectionResult{Code: int64(reply.Code), Text: reply.Text}
	if res.Code < 0 {
		a.log.Error("projection.order_created_conflict", "reservation_id", in.ReservationID, "order_id", in.OrderID,
			"lua_code", res.Code, "result", res.Text)
	}
	return res, nil
}
