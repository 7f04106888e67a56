package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- order_created.lua

// OrderCreatedArgs projects a created order onto its reservation (order_created.lua).
type OrderCreatedArgs struct {
	ReservationID string
	OrderID       string
}

// Render returns the KEYS and ARGV of the call.
func (a OrderCreatedArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Reservation(a.ReservationID), k.Counter(), k.SendDue()}, []any{a.ReservationID, a.OrderID}
}

// OrderCreatedCode is order_created.lua's answer.
type OrderCreatedCode int64

// order_created.lua's codes.
const (
	OrderCreatedProjected        OrderCreatedCode = 1
	OrderCreatedAlreadyProjected OrderCreatedCode = 2  // idempotent repeat
	OrderCreatedMissing          OrderCreatedCode = -1 // reservation hash missing: nothing changed
	OrderCreatedIDMismatch       OrderCreatedCode = -2
	// OrderCreatedInvalidStatus: the reservation cannot take an order (e.g.
	// COMPENSATED); Text is its status. Nothing changed.
	OrderCreatedInvalidStatus OrderCreatedCode = -4
)

var orderCreatedNames = map[OrderCreatedCode]string{OrderCreatedProjected: "PROJECTED",
	OrderCreatedAlreadyProjected: "ALREADY_PROJECTED", OrderCreatedMissing: "RESERVATION_MISSING",
	OrderCreatedIDMismatch: "RESERVATION_ID_MISMATCH", OrderCreatedInvalidStatus: "INVALID_STATUS"}

func (c OrderCreatedCode) String() string { return name(orderCreatedNames, c) }

// OrderCreatedReply is order_created.lua's {code, status}.
type OrderCreatedReply struct {
	Code OrderCreatedCode
	Text string // the script's text: a status or the reason
}

// OrderCreated runs order_created.lua.
func OrderCreated(ctx context.Context, rdb redis.Scripter, k Keys, a OrderCreatedArgs) (OrderCreatedReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, orderCreated, "order_created.lua", keys, argv, parseOrderCreated)
}

func parseOrderCreated(v any) (OrderCreatedReply, error) {
	code, text, err := codeText("order_created.lua", v, known(orderCreatedNames))
	return OrderCreatedReply{Code: OrderCreatedCode(code), Text: text}, err
}

// ---- compensate.lua

// CompensateArgs gives one rejected reservation's unit back (compensate.lua).
type CompensateArgs struct {
	ReservationID  string
	CompensationID string
	UserID         int64 // whose guard FreeUserGuard frees
	NowMS          int64
	TTL            time.Duration // of the marker and the settled reservation
	// FreeUserGuard frees the user's guard (if this reservation holds it) so
	// the user may try again.
	FreeUserGuard bool
}

// Render returns the KEYS and ARGV of the call.
func (a CompensateArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Reservation(a.ReservationID), k.Counter(), k.CompensationMarker(a.ReservationID), k.SendDue(),
			k.User(a.UserID), k.Holders()},
		[]any{a.ReservationID, a.CompensationID, a.NowMS, a.TTL.Milliseconds(), flag(a.FreeUserGuard), a.UserID}
}

// CompensateCode is compensate.lua's answer.
type CompensateCode int64

// compensate.lua's codes.
const (
	Compensated             CompensateCode = 1  // stock restored now
	AlreadyCompensated      CompensateCode = 2  // idempotent success: stock unchanged
	CompensateMissing       CompensateCode = -1 // reservation hash missing: never add stock blindly
	CompensateIDMismatch    CompensateCode = -2 // reservation_id mismatch
	CompensateOrderExists   CompensateCode = -3 // the reservation holds an order
	CompensateInvalidStatus CompensateCode = -4 // Text is INVALID_STATUS:<status>
	CompensateIDConflict    CompensateCode = -5 // another compensation id already applied
)

var compensateNames = map[CompensateCode]string{Compensated: "COMPENSATED", AlreadyCompensated: "ALREADY_COMPENSATED",
	CompensateMissing: "RESERVATION_MISSING", CompensateIDMismatch: "RESERVATION_ID_MISMATCH",
	CompensateOrderExists: "ORDER_ALREADY_EXISTS", CompensateInvalidStatus: "INVALID_STATUS",
	CompensateIDConflict: "COMPENSATION_ID_CONFLICT"}

func (c CompensateCode) String() string { return name(compensateNames, c) }

// Applied reports success: compensated now or before.
func (c CompensateCode) Applied() bool { return c == Compensated || c == AlreadyCompensated }

// CompensateReply is compensate.lua's {code, text}.
type CompensateReply struct {
	Code CompensateCode
	Text string
}

// Compensate runs compensate.lua.
func Compensate(ctx context.Context, rdb redis.Scripter, k Keys, a CompensateArgs) (CompensateReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, compensate, "compensate.lua", keys, argv, parseCompensate)
}

func parseCompensate(v any) (CompensateReply, error) {
	code, text, err := codeText("compensate.lua", v, known(compensateNames))
	return CompensateReply{Code: CompensateCode(code), Text: text}, err
}

// ---- release.lua

// ReleaseArgs gives a cancelled order's unit back (release.lua).
type ReleaseArgs struct {
	ReservationID string
	ReleaseID     string // fixed per order
	NowMS         int64
	TTL           time.Duration // of the marker and the released reservation
}

// Render returns the KEYS and ARGV of the call.
func (a ReleaseArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Reservation(a.ReservationID), k.Counter(), k.ReleaseMarker(a.ReservationID)},
		[]any{a.ReservationID, a.ReleaseID, a.NowMS, a.TTL.Milliseconds()}
}

// ReleaseCode is release.lua's answer.
type ReleaseCode int64

// release.lua's codes.
const (
	Released             ReleaseCode = 1
	AlreadyReleased      ReleaseCode = 2
	ReleaseMissing       ReleaseCode = -1 // nothing changed
	ReleaseInvalidStatus ReleaseCode = -4 // only an ORDER_CREATED projection is released
	ReleaseIDConflict    ReleaseCode = -5
)

var releaseNames = map[ReleaseCode]string{Released: "RELEASED", AlreadyReleased: "ALREADY_RELEASED",
	ReleaseMissing: "RESERVATION_MISSING", ReleaseInvalidStatus: "INVALID_STATUS", ReleaseIDConflict: "RELEASE_ID_CONFLICT"}

func (c ReleaseCode) String() string { return name(releaseNames, c) }

// ReleaseReply is release.lua's {code, text}.
type ReleaseReply struct {
	Code ReleaseCode
	Text string
}

// Release runs release.lua.
func Release(ctx context.Context, rdb redis.Scripter, k Keys, a ReleaseArgs) (ReleaseReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, release, "release.lua", keys, argv, parseRelease)
}

func parseRelease(v any) (ReleaseReply, error) {
	code, text, err := codeText("release.lua", v, known(releaseNames))
	return ReleaseReply{Code: ReleaseCode(code), Text: text}, err
}
