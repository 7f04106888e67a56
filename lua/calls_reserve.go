package lua

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---- reserve.lua

// ReserveArgs is one admission (reserve.lua). The activity and SKU ids
// (ARGV[5], ARGV[6]) and the bucket (ARGV[12]) are the Keys'.
type ReserveArgs struct {
	ReservationID string
	MessageID     string
	RequestID     string
	UserID        int64
	NowMS         int64
	KeyVersion    int
	SchemaVersion int
	TTL           time.Duration // garbage collection of the keys only
	SendDueAtMS   int64         // the reservation's first score in send_due
}

// Render returns the KEYS and ARGV of the call.
func (a ReserveArgs) Render(k Keys) (keys []string, argv []any) {
	keys, text := a.Template(k, strconv.FormatInt(a.UserID, 10))
	argv = make([]any, len(text))
	for i, s := range text {
		argv[i] = s
	}
	return keys, argv
}

// Template renders the call as text with user in place of the user id
// (a.UserID is not used), for clients that substitute a placeholder per call:
// redis-benchmark's __rand_int__. Render is Template with the decimal UserID.
func (a ReserveArgs) Template(k Keys, user string) (keys, argv []string) {
	keys = []string{k.Counter(), k.Meta(), k.Reservation(a.ReservationID), k.request(user, a.RequestID),
		k.user(user), k.SendDue(), k.Holders()}
	argv = []string{a.ReservationID, a.MessageID, a.RequestID, user,
		strconv.FormatInt(k.ActivityID, 10), strconv.FormatInt(k.SKUID, 10),
		strconv.FormatInt(a.NowMS, 10), strconv.Itoa(a.KeyVersion), strconv.Itoa(a.SchemaVersion),
		strconv.FormatInt(a.TTL.Milliseconds(), 10), strconv.FormatInt(a.SendDueAtMS, 10), strconv.Itoa(k.Bucket)}
	return keys, argv
}

// ReserveCode is reserve.lua's answer.
type ReserveCode int64

// reserve.lua's codes.
const (
	ReserveAdmitted        ReserveCode = 1  // a new reservation
	ReserveDuplicate       ReserveCode = 2  // this request was admitted before
	ReserveSoldOut         ReserveCode = -1 // no stock left
	ReserveAlreadyReserved ReserveCode = -2 // the user holds another reservation
	ReserveNotStarted      ReserveCode = -3
	ReserveEnded           ReserveCode = -4
	ReserveNotConfigured   ReserveCode = -5 // no sale window in the meta hash
)

var reserveNames = map[ReserveCode]string{ReserveAdmitted: "RESERVED", ReserveDuplicate: "DUPLICATE_REQUEST",
	ReserveSoldOut: "SOLD_OUT", ReserveAlreadyReserved: "ALREADY_RESERVED", ReserveNotStarted: "NOT_STARTED",
	ReserveEnded: "ENDED", ReserveNotConfigured: "NOT_CONFIGURED"}

func (c ReserveCode) String() string { return name(reserveNames, c) }

// ReserveReply is reserve.lua's {code, reservation_id, detail}.
type ReserveReply struct {
	Code ReserveCode
	// ReservationID is the admitted or earlier reservation (Admitted,
	// Duplicate) or the one the user holds (AlreadyReserved); empty otherwise.
	ReservationID string
	// DeadlineMS is the new reservation's business deadline (Admitted only).
	DeadlineMS int64
	// Status is the earlier reservation's current status (Duplicate only;
	// "UNKNOWN" when the script could not read it).
	Status string
	// HoldersVersion is the holders hash's version (SoldOut only).
	HoldersVersion int64
}

// Reserve runs reserve.lua.
func Reserve(ctx context.Context, rdb redis.Scripter, k Keys, a ReserveArgs) (ReserveReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, reserve, "reserve.lua", keys, argv, parseReserve)
}

func parseReserve(v any) (ReserveReply, error) {
	const script = "reserve.lua"
	a, err := array(script, v, 3)
	if err != nil {
		return ReserveReply{}, err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return ReserveReply{}, err
	}
	r := ReserveReply{Code: ReserveCode(code)}
	if !known(reserveNames)(code) {
		return ReserveReply{}, badReply(script, v, "unknown code %d", code)
	}
	if r.ReservationID, err = stringAt(script, v, a, 1); err != nil {
		return ReserveReply{}, err
	}
	switch r.Code {
	case ReserveAdmitted:
		if r.DeadlineMS, err = int64At(script, v, a, 2); err != nil {
			return ReserveReply{}, err
		}
	case ReserveSoldOut:
		if r.HoldersVersion, err = int64At(script, v, a, 2); err != nil {
			return ReserveReply{}, err
		}
	case ReserveDuplicate:
		if a[2] == nil { // HGET status of a hash without one
			r.Status = "UNKNOWN"
		} else if r.Status, err = stringAt(script, v, a, 2); err != nil {
			return ReserveReply{}, err
		}
	}
	return r, nil
}
