package lua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The typed layer: one function per script, with typed arguments and a typed
// reply. Each XArgs renders its call's KEYS and ARGV in the order of the
// script's header (Render), so no caller spells those lists out. Points in
// time are Unix milliseconds, as the scripts store them; spans are
// time.Duration, sent as milliseconds.

// ErrBadReply is wrapped by every error about a script reply that does not
// have the shape the script's header documents.
var ErrBadReply = errors.New("unexpected script reply")

func badReply(script string, reply any, format string, a ...any) error {
	return fmt.Errorf("%s: %w %#v: %s", script, ErrBadReply, reply, fmt.Sprintf(format, a...))
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func run[R any](ctx context.Context, rdb redis.Scripter, s *redis.Script, name string, keys []string, argv []any,
	parse func(any) (R, error)) (R, error) {
	v, err := s.Run(ctx, rdb, keys, argv...).Result()
	if err != nil {
		var zero R
		return zero, fmt.Errorf("%s: %w", name, err)
	}
	return parse(v)
}

// array checks the reply is an array of n elements or more.
func array(script string, v any, n int) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, badReply(script, v, "not an array")
	}
	if len(a) < n {
		return nil, badReply(script, v, "%d elements, want %d", len(a), n)
	}
	return a, nil
}

func int64At(script string, v any, a []any, i int) (int64, error) {
	n, ok := a[i].(int64)
	if !ok {
		return 0, badReply(script, v, "element %d is %T, want an integer", i+1, a[i])
	}
	return n, nil
}

func stringAt(script string, v any, a []any, i int) (string, error) {
	s, ok := a[i].(string)
	if !ok {
		return "", badReply(script, v, "element %d is %T, want a string", i+1, a[i])
	}
	return s, nil
}

// codeText parses the {code, text} replies; known reports the script's codes.
func codeText(script string, v any, known func(int64) bool) (int64, string, error) {
	a, err := array(script, v, 2)
	if err != nil {
		return 0, "", err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return 0, "", err
	}
	if !known(code) {
		return 0, "", badReply(script, v, "unknown code %d", code)
	}
	text, err := stringAt(script, v, a, 1)
	if err != nil {
		return 0, "", err
	}
	return code, text, nil
}

// ---- reserve.lua

// ReserveArgs is one admission (reserve.lua). The activity and SKU ids
// (ARGV[5], ARGV[6]) are the Keys'.
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
		k.user(user), k.SendDue()}
	argv = []string{a.ReservationID, a.MessageID, a.RequestID, user,
		strconv.FormatInt(k.ActivityID, 10), strconv.FormatInt(k.SKUID, 10),
		strconv.FormatInt(a.NowMS, 10), strconv.Itoa(a.KeyVersion), strconv.Itoa(a.SchemaVersion),
		strconv.FormatInt(a.TTL.Milliseconds(), 10), strconv.FormatInt(a.SendDueAtMS, 10)}
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
	case ReserveDuplicate:
		if a[2] == nil { // HGET status of a hash without one
			r.Status = "UNKNOWN"
		} else if r.Status, err = stringAt(script, v, a, 2); err != nil {
			return ReserveReply{}, err
		}
	}
	return r, nil
}

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

// SendDoneArgs records one send's outcome (send_done.lua).
type SendDoneArgs struct {
	ReservationID string
	Outcome       string // OutcomePublished, OutcomeUnknown or OutcomeFailed
	NextDueMS     int64  // UNKNOWN/FAILED: when to send again
	RecheckMS     int64  // PUBLISHED: when to look again should it still be unsettled
	ErrText       string // may be empty
}

// Render returns the KEYS and ARGV of the call.
func (a SendDoneArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Reservation(a.ReservationID), k.SendDue(), k.Counter()},
		[]any{a.ReservationID, a.Outcome, a.NextDueMS, a.RecheckMS, a.ErrText}
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

// SendDone runs send_done.lua.
func SendDone(ctx context.Context, rdb redis.Scripter, k Keys, a SendDoneArgs) (SendDoneReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, sendDone, "send_done.lua", keys, argv, parseSendDone)
}

// QueueSendDone queues send_done.lua by EVALSHA (no EVAL fallback: a NOSCRIPT
// shows in the pipeline's Exec) on pipe; ParseSendDone reads the reply after Exec.
func QueueSendDone(ctx context.Context, pipe redis.Pipeliner, k Keys, a SendDoneArgs) *redis.Cmd {
	keys, argv := a.Render(k)
	return sendDone.EvalSha(ctx, pipe, keys, argv...)
}

// ParseSendDone reads the reply of a QueueSendDone command after its pipeline ran.
func ParseSendDone(cmd *redis.Cmd) (SendDoneReply, error) {
	v, err := cmd.Result()
	if err != nil {
		return SendDoneReply{}, fmt.Errorf("send_done.lua: %w", err)
	}
	return parseSendDone(v)
}

func parseSendDone(v any) (SendDoneReply, error) {
	code, text, err := codeText("send_done.lua", v, known(sendDoneNames))
	return SendDoneReply{Code: SendDoneCode(code), State: text}, err
}

// ---- init_sku.lua

// InitSKUArgs sets up one SKU's admission state (init_sku.lua): the sale
// window always, the counters only when absent.
type InitSKUArgs struct {
	Initial, Available int64 // from PostgreSQL
	StartMS, EndMS     int64
	OrderDeadline      time.Duration
	PaymentTimeout     time.Duration
	// Unmoved: PostgreSQL shows no stock movement yet (initial = available),
	// so absent counters may be created.
	Unmoved bool
}

// Render returns the KEYS and ARGV of the call.
func (a InitSKUArgs) Render(k Keys) (keys []string, argv []any) {
	return []string{k.Counter(), k.Meta()}, []any{a.Initial, a.Available, a.StartMS, a.EndMS,
		a.OrderDeadline.Milliseconds(), a.PaymentTimeout.Milliseconds(), flag(a.Unmoved)}
}

// InitSKUCode is init_sku.lua's answer.
type InitSKUCode int64

// init_sku.lua's codes.
const (
	InitSKUCreated InitSKUCode = 1 // counters created
	InitSKUKept    InitSKUCode = 0 // counters kept (a live SKU)
	// InitSKUNeedsRebuild: counters missing while PostgreSQL shows movements;
	// nothing written to them, Redis must be rebuilt from PostgreSQL.
	InitSKUNeedsRebuild InitSKUCode = -1
)

var initSKUNames = map[InitSKUCode]string{InitSKUCreated: "CREATED", InitSKUKept: "KEPT",
	InitSKUNeedsRebuild: "NEEDS_REBUILD"}

func (c InitSKUCode) String() string { return name(initSKUNames, c) }

// InitSKUReply is init_sku.lua's {code, available}.
type InitSKUReply struct {
	Code      InitSKUCode
	Available int64 // the counters' available stock (0 for NeedsRebuild)
}

// InitSKU runs init_sku.lua.
func InitSKU(ctx context.Context, rdb redis.Scripter, k Keys, a InitSKUArgs) (InitSKUReply, error) {
	keys, argv := a.Render(k)
	return run(ctx, rdb, initSKU, "init_sku.lua", keys, argv, parseInitSKU)
}

func parseInitSKU(v any) (InitSKUReply, error) {
	const script = "init_sku.lua"
	a, err := array(script, v, 2)
	if err != nil {
		return InitSKUReply{}, err
	}
	code, err := int64At(script, v, a, 0)
	if err != nil {
		return InitSKUReply{}, err
	}
	if !known(initSKUNames)(code) {
		return InitSKUReply{}, badReply(script, v, "unknown code %d", code)
	}
	avail, err := int64At(script, v, a, 1)
	if err != nil {
		return InitSKUReply{}, err
	}
	return InitSKUReply{Code: InitSKUCode(code), Available: avail}, nil
}

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
			k.User(a.UserID)},
		[]any{a.ReservationID, a.CompensationID, a.NowMS, a.TTL.Milliseconds(), flag(a.FreeUserGuard)}
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

func name[C ~int64](names map[C]string, c C) string {
	if n, ok := names[c]; ok {
		return n
	}
	return "code(" + strconv.FormatInt(int64(c), 10) + ")"
}

func known[C ~int64](names map[C]string) func(int64) bool {
	return func(c int64) bool { _, ok := names[C(c)]; return ok }
}
