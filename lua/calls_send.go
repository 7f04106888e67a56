package lua

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ---- send_claim.lua

// SendClaimArgs lease-claims the due items of one SKU's send_due (send_claim.lua).
type SendClaimArgs struct {
	NowMS        int64 // items due at or before now
	LeaseUntilMS int64 // the claimed items' new score
	Max          int
}

// Render returns the KEYS and ARGV of the call.
func (a SendClaimArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.SendDue()}, []any{a.NowMS, a.LeaseUntilMS, a.Max}
}

// Claimed is one claimed send_due item.
type Claimed struct {
	ReservationID string
	DueMS         int64 // its score before the claim
}

// SendClaim runs send_claim.lua and returns the claimed items.
func SendClaim(ctx context.Context, rdb redis.Scripter, k Keys, a SendClaimArgs) ([]Claimed, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, sendClaim, "send_claim.lua", keys, argv, parseSendClaim)
}

func parseSendClaim(v any) ([]Claimed, error) {
	const script = "send_claim.lua"
	a, err := array(script, v, 0)
	if err != nil {
		return nil, err
	}
	if len(a)%2 != 0 {
		return nil, badReply(script, v, "%d elements, want (reservation_id, score) pairs", len(a))
	}
	out := make([]Claimed, 0, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		rid, err := stringAt(script, v, a, i)
		if err != nil {
			return nil, err
		}
		text, err := stringAt(script, v, a, i+1)
		if err != nil {
			return nil, err
		}
		score, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: score of %s: %w", script, ErrBadReply, rid, err)
		}
		out = append(out, Claimed{ReservationID: rid, DueMS: int64(score)})
	}
	return out, nil
}

// ---- send_done.lua

// Send outcomes send_done.lua records (anything else counts as failed).
const (
	OutcomePublished = "PUBLISHED"
	OutcomeUnknown   = "UNKNOWN"
	OutcomeFailed    = "FAILED"
)

// SendDoneArgs records one send's outcome for reservations of one SKU
// (send_done.lua): a gateway batch or one scanner send.
type SendDoneArgs struct {
	Outcome   string // OutcomePublished, OutcomeUnknown or OutcomeFailed
	NextDueMS int64  // UNKNOWN/FAILED: when to send again
	ErrText   string // may be empty
	Items     []SendDoneItem
}

// SendDoneItem is one reservation of a SendDoneArgs.
type SendDoneItem struct {
	ReservationID string
	RecheckMS     int64 // PUBLISHED: when to look again should it still be unsettled
}

// Render returns the KEYS and ARGV of the call.
func (a SendDoneArgs) Render(k Keys) (keys []string, argv []any) {
	keys = make([]string, 0, 2+len(a.Items))
	argv = make([]any, 0, 3+2*len(a.Items))
	keys = append(keys, k.SendDue(), k.Counter())
	argv = append(argv, a.Outcome, a.NextDueMS, a.ErrText)
	for _, it := range a.Items {
		keys = append(keys, k.Reservation(it.ReservationID))
		argv = append(argv, it.ReservationID, it.RecheckMS)
	}
	return keys, argv
}

// SendDoneCode is send_done.lua's answer.
type SendDoneCode int64

// send_done.lua's codes.
const (
	SendDoneRecorded SendDoneCode = 1  // State is the mq_state after it: PUBLISHED, UNKNOWN or PENDING
	SendDoneSettled  SendDoneCode = 3  // the reservation left RESERVED: out of send_due
	SendDoneMissing  SendDoneCode = -1 // the hash is gone: out of send_due, counted
)

var sendDoneNames = map[SendDoneCode]string{SendDoneRecorded: "RECORDED", SendDoneSettled: "SETTLED",
	SendDoneMissing: "MISSING"}

func (c SendDoneCode) String() string { return name(sendDoneNames, c) }

// SendDoneReply is send_done.lua's {code, mq_state}.
type SendDoneReply struct {
	Code SendDoneCode
	// State is the mq_state after a recorded outcome, or SETTLED / MISSING.
	State string
}

// SendDone runs send_done.lua; the replies are in the order of a.Items.
func SendDone(ctx context.Context, rdb redis.Scripter, k Keys, a SendDoneArgs) ([]SendDoneReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, sendDone, "send_done.lua", keys, argv, parseSendDone(len(a.Items)))
}

// QueueSendDone queues send_done.lua by EVALSHA (no EVAL fallback: a NOSCRIPT
// shows in the pipeline's Exec) on pipe; ParseSendDone reads the replies after Exec.
func QueueSendDone(ctx context.Context, pipe redis.Pipeliner, k Keys, a SendDoneArgs) *redis.Cmd {
	keys, argv := a.Render(k)
	return sendDone.EvalSha(ctx, pipe, keys, argv...)
}

// ParseSendDone reads the replies of a QueueSendDone command of n
// reservations after its pipeline ran.
func ParseSendDone(cmd *redis.Cmd, n int) ([]SendDoneReply, error) {
	v, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("send_done.lua: %w", err)
	}
	return parseSendDone(n)(v)
}

func parseSendDone(n int) func(v any) ([]SendDoneReply, error) {
	return func(v any) ([]SendDoneReply, error) {
		a, err := array("send_done.lua", v, 2*n)
		if err != nil {
			return nil, err
		}
		if len(a) != 2*n {
			return nil, badReply("send_done.lua", v, "%d elements for %d reservations", len(a), n)
		}
		out := make([]SendDoneReply, n)
		for i := range out {
			code, text, err := codeText("send_done.lua", a[2*i:2*i+2], known(sendDoneNames))
			if err != nil {
				return nil, err
			}
			out[i] = SendDoneReply{Code: SendDoneCode(code), State: text}
		}
		return out, nil
	}
}
