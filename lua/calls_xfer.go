package lua

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stock transfers between the buckets of one SKU (docs/scale.md): take in
// the giving bucket, give in the receiving one, close in the giving one, all
// with one transfer id. Each call's Keys is the bucket it runs in.

// Transfer record states (the record's field state).
const (
	TransferSent = "SENT" // taken from the giving bucket; given or not yet
	TransferDone = "DONE" // given and closed
)

// ---- xfer_take.lua

// XferTakeArgs takes K units out of the giving bucket for transfer
// TransferID to bucket To (xfer_take.lua).
type XferTakeArgs struct {
	TransferID string
	To         int
	K          int64
	NowMS      int64
}

// Render returns the KEYS and ARGV of the call; k is the giving bucket.
func (a XferTakeArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Counter(), k.Transfer(a.TransferID), k.TransfersOut()},
		[]any{a.TransferID, strconv.Itoa(a.To), a.K, a.NowMS}
}

// XferTakeCode is xfer_take.lua's answer.
type XferTakeCode int64

// xfer_take.lua's codes.
const (
	XferTaken        XferTakeCode = 1  // units taken, record SENT
	XferTakeExists   XferTakeCode = 2  // the record was there (a repeat): nothing changed
	XferShort        XferTakeCode = -1 // available < k: nothing written
	XferTakeConflict XferTakeCode = -2 // the id's record has another target or k: nothing changed
)

var xferTakeNames = map[XferTakeCode]string{XferTaken: "TAKEN", XferTakeExists: "EXISTS", XferShort: "SHORT",
	XferTakeConflict: "ID_CONFLICT"}

func (c XferTakeCode) String() string { return name(xferTakeNames, c) }

// XferTakeReply is xfer_take.lua's {code, state, available}.
type XferTakeReply struct {
	Code      XferTakeCode
	State     string // the record's state (TransferSent, TransferDone), "" for Short
	Available int64  // the giving bucket's available after the call
}

// XferTake runs xfer_take.lua in bucket k.
func XferTake(ctx context.Context, rdb redis.Scripter, k Keys, a XferTakeArgs) (XferTakeReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, xferTake, "xfer_take.lua", keys, argv, parseXferTake)
}

func parseXferTake(v any) (XferTakeReply, error) {
	const script = "xfer_take.lua"
	code, state, err := codeText(script, v, known(xferTakeNames))
	if err != nil {
		return XferTakeReply{}, err
	}
	a, err := array(script, v, 3)
	if err != nil {
		return XferTakeReply{}, err
	}
	avail, err := int64At(script, v, a, 2)
	return XferTakeReply{Code: XferTakeCode(code), State: state, Available: avail}, err
}

// ---- xfer_give.lua

// XferGiveArgs gives transfer TransferID's K units, taken from bucket From,
// to the receiving bucket (xfer_give.lua).
type XferGiveArgs struct {
	TransferID string
	From       int
	K          int64
	// TTL of the marker: it must outlive every retry of the give (the
	// reservation TTL, days).
	TTL time.Duration
}

// Render returns the KEYS and ARGV of the call; k is the receiving bucket.
func (a XferGiveArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Counter(), k.TransferIn(a.TransferID)},
		[]any{a.TransferID, strconv.Itoa(a.From), a.K, a.TTL.Milliseconds()}
}

// XferGiveCode is xfer_give.lua's answer.
type XferGiveCode int64

// xfer_give.lua's codes.
const (
	XferGiven         XferGiveCode = 1  // units added now
	XferAlreadyGiven  XferGiveCode = 2  // the marker was there: nothing changed
	XferGiveNoCounter XferGiveCode = -1 // the receiving bucket has no counter: nothing written
)

var xferGiveNames = map[XferGiveCode]string{XferGiven: "GIVEN", XferAlreadyGiven: "ALREADY",
	XferGiveNoCounter: "COUNTER_MISSING"}

func (c XferGiveCode) String() string { return name(xferGiveNames, c) }

// Applied reports that the units are in the receiving bucket (now or before).
func (c XferGiveCode) Applied() bool { return c == XferGiven || c == XferAlreadyGiven }

// XferGiveReply is xfer_give.lua's {code, available}.
type XferGiveReply struct {
	Code      XferGiveCode
	Available int64 // the receiving bucket's available after the call
}

// XferGive runs xfer_give.lua in bucket k.
func XferGive(ctx context.Context, rdb redis.Scripter, k Keys, a XferGiveArgs) (XferGiveReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, xferGive, "xfer_give.lua", keys, argv, parseXferGive)
}

func parseXferGive(v any) (XferGiveReply, error) {
	const script = "xfer_give.lua"
	a, err := array(script, v, 2)
	if err != nil {
		return XferGiveReply{}, err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return XferGiveReply{}, err
	}
	if !known(xferGiveNames)(code) {
		return XferGiveReply{}, badReply(script, v, "unknown code %d", code)
	}
	avail, err := int64At(script, v, a, 1)
	return XferGiveReply{Code: XferGiveCode(code), Available: avail}, err
}

// ---- xfer_close.lua

// XferCloseArgs closes transfer TransferID in the giving bucket
// (xfer_close.lua). Call it only after XferGive applied the same id.
type XferCloseArgs struct {
	TransferID string
	TTL        time.Duration // of the DONE record
}

// Render returns the KEYS and ARGV of the call; k is the giving bucket.
func (a XferCloseArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Transfer(a.TransferID), k.TransfersOut(), k.TransfersClosed()}, []any{a.TransferID, a.TTL.Milliseconds()}
}

// XferCloseCode is xfer_close.lua's answer.
type XferCloseCode int64

// xfer_close.lua's codes.
const (
	XferClosed        XferCloseCode = 1  // SENT → DONE now, listed in xfer_closed
	XferAlreadyClosed XferCloseCode = 2  // DONE before
	XferCloseMissing  XferCloseCode = -1 // no record: a stray xfer_out member was removed
)

var xferCloseNames = map[XferCloseCode]string{XferClosed: "CLOSED", XferAlreadyClosed: "ALREADY_CLOSED",
	XferCloseMissing: "MISSING"}

func (c XferCloseCode) String() string { return name(xferCloseNames, c) }

// XferCloseReply is xfer_close.lua's {code, state}.
type XferCloseReply struct {
	Code  XferCloseCode
	State string
}

// XferClose runs xfer_close.lua in bucket k.
func XferClose(ctx context.Context, rdb redis.Scripter, k Keys, a XferCloseArgs) (XferCloseReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, xferClose, "xfer_close.lua", keys, argv, parseXferClose)
}

func parseXferClose(v any) (XferCloseReply, error) {
	code, state, err := codeText("xfer_close.lua", v, known(xferCloseNames))
	return XferCloseReply{Code: XferCloseCode(code), State: state}, err
}
