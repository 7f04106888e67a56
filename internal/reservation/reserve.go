// Package reservation is the gateway's hot path: atomic admission in Redis
// (lua/reserve.lua), the immediate send of ORDER_CREATE_REQUESTED with its
// fixed message_id, and the status a client reads back.
package reservation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/lua"
)

// Publisher sends one message synchronously. Implementations must be safe
// for concurrent use; a send whose outcome is unknown wraps mq.ErrSendUnknown.
type Publisher interface {
	Send(ctx context.Context, m mq.Message) (mq.SendResult, error)
}

// BatchPublisher also sends several messages of one topic as one batch.
type BatchPublisher interface {
	Publisher
	SendBatch(ctx context.Context, msgs []mq.Message) (mq.SendResult, error)
}

var _ BatchPublisher = (*mq.Producer)(nil)

// Code is the outcome of a reserve request.
type Code string

// Outcomes of Reserve. Only Queued admits; it never means "order created".
const (
	Queued          Code = "QUEUED"
	SoldOut         Code = "SOLD_OUT"
	AlreadyReserved Code = "ALREADY_RESERVED"
	NotStarted      Code = "SALE_NOT_STARTED"
	Ended           Code = "SALE_ENDED"
	UnknownSale     Code = "UNKNOWN_SALE"
	// SaleLimitReached: the user holds the sale's max_per_user reservations
	// (docs/spec.md#user-cap); nothing was held.
	SaleLimitReached Code = "SALE_LIMIT_REACHED"
)

// Result is what the gateway answers.
type Result struct {
	Code          Code
	ReservationID uuid.UUID // set for Queued (new or repeated request) and AlreadyReserved
	// Duplicate is true when this request_id was admitted before: the answer
	// repeats the original one.
	Duplicate bool
	// Status is the reservation's current state for a duplicate (RESERVED, ORDER_CREATED, ...).
	Status string
	// Limit is set for SaleLimitReached only.
	Limit *Limit
}

// Limit is what a SALE_LIMIT_REACHED answer names: the sale's cap and the
// reservations the user holds in it (each may be cancelled to free a place).
type Limit struct {
	MaxPerUser int
	Held       []uuid.UUID
}

// Options of a Reserver.
type Options struct {
	Topic          string
	SendTimeout    time.Duration
	SendDueDelay   time.Duration // the scanner may re-send after this
	RetryBackoff   time.Duration // after a failed/unknown gateway send
	ReservationTTL time.Duration // garbage collection only
	// RecheckAfter: a published reservation still unsettled this long after
	// its business deadline is looked at (and re-sent) by the scanner again.
	RecheckAfter time.Duration
	SoldOutMemo  time.Duration
	// NoRefill turns off the on-demand moves between the buckets of a SKU
	// (refill.go): a bucket's SOLD_OUT is then the answer even while a
	// sibling has units (SECKILL_RESERVE_REFILL=false; the bench's baseline).
	NoRefill bool
	// MaxBatch and Linger shape the batches of immediate sends (default 64,
	// 1 ms; the gateway uses SECKILL_SEND_LINGER, 5 ms).
	MaxBatch int
	Linger   time.Duration
	// Scripts runs reserve.lua and the hold scripts (default: the Reserver's
	// client). The gateway passes the client's auto-pipeliner
	// (SECKILL_RESERVE_AUTOPIPELINE).
	Scripts redis.Scripter
	// HoldGrace: a user's hold whose reservation hash is missing is a leak
	// only past this age (holds.go; default DefaultHoldGrace).
	HoldGrace time.Duration
}

// Reserver admits requests. It is safe for concurrent use.
type Reserver struct {
	rdb     redis.Cmdable
	ids     *ids.Deriver
	pub     BatchPublisher
	opt     Options
	m       *metrics.Reservation
	fp      *failpoint.Set
	log     *slog.Logger
	now     func() time.Time
	soldOut soldOut // the SKUs known sold out, and their holders (soldout.go)
	buckets *Buckets

	// The immediate sends, batched (see sender.go).
	queue     chan sendItem
	stopped   chan struct{}
	closeOnce sync.Once
}

// NewReserver builds a Reserver; every dependency is required.
func NewReserver(rdb redis.Cmdable, d *ids.Deriver, pub BatchPublisher, opt Options, m *metrics.Reservation,
	fp *failpoint.Set, log *slog.Logger) (*Reserver, error) {
	if rdb == nil || d == nil || pub == nil || m == nil || log == nil {
		return nil, errors.New("reservation: nil dependency")
	}
	if opt.Topic == "" || opt.SendTimeout <= 0 || opt.SendDueDelay <= 0 || opt.ReservationTTL <= 0 {
		return nil, fmt.Errorf("reservation: incomplete options %+v", opt)
	}
	if opt.RetryBackoff <= 0 {
		opt.RetryBackoff = time.Second
	}
	if opt.RecheckAfter <= 0 {
		opt.RecheckAfter = DefaultRecheckAfter
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 64
	}
	if opt.Linger <= 0 {
		opt.Linger = time.Millisecond
	}
	if opt.Scripts == nil {
		opt.Scripts = rdb
	}
	if opt.HoldGrace <= 0 {
		opt.HoldGrace = DefaultHoldGrace
	}
	r := &Reserver{rdb: rdb, ids: d, pub: pub, opt: opt, m: m, fp: fp, log: log, now: time.Now, buckets: NewBuckets(rdb),
		queue: make(chan sendItem, 16*opt.MaxBatch), stopped: make(chan struct{})}
	go r.sendLoop()
	return r, nil
}

// Reserve admits (activity, sku) for userID under the client's requestID.
// A nil error with Code Queued means the reservation exists in Redis and its
// message is sent or will be re-sent by the scanner. An error means the
// outcome is unknown to the caller (e.g. Redis unreachable); retrying with
// the same requestID is safe.
func (r *Reserver) Reserve(ctx context.Context, userID, activityID, skuID int64, requestID uuid.UUID) (Result, error) {
	start := r.now()
	res, err := r.reserve(ctx, userID, activityID, skuID, requestID)
	r.m.ReserveLatency.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		r.m.Requests.WithLabelValues("error").Inc()
	case res.Duplicate:
		r.m.Requests.WithLabelValues("DUPLICATE").Inc()
	default:
		r.m.Requests.WithLabelValues(string(res.Code)).Inc()
	}
	return res, err
}

func (r *Reserver) reserve(ctx context.Context, userID, activityID, skuID int64, requestID uuid.UUID) (Result, error) {
	sku, err := r.buckets.SKU(ctx, activityID, skuID)
	if err != nil {
		return Result{}, err
	}
	k := sku.For(userID)
	now := r.now()
	st := r.soldOut.get(k)
	if res, ok := st.answer(now, userID, requestID); ok {
		if res.Code == SoldOut {
			r.m.SoldOutMemo.Inc()
		}
		return res, nil
	}
	if st != nil && now.Before(st.until) {
		return r.knownSoldOut(ctx, k, userID, requestID)
	}

	id, err := r.ids.ForRequest(0, activityID, skuID, userID, requestID)
	if err != nil {
		return Result{}, err
	}
	nowMS := now.UnixMilli()
	args := lua.ReserveArgs{ReservationID: id.ReservationID.String(),
		MessageID: id.MessageID.String(), RequestID: requestID.String(), UserID: userID, NowMS: nowMS,
		KeyVersion: id.KeyVersion, SchemaVersion: ids.SchemaVersion, TTL: r.opt.ReservationTTL,
		SendDueAtMS: nowMS + r.opt.SendDueDelay.Milliseconds()}
	hold := lua.Hold{ReservationID: args.ReservationID, SKUID: skuID, ClaimedAtMS: nowMS}
	if res, done, err := r.claimHold(ctx, sku, k, userID, requestID, hold); done {
		return res, err
	}
	reply, err := r.reserveScript(ctx, sku, k, args)
	if err != nil {
		return Result{}, err // unknown: the claim stays (heal frees it if nothing was admitted)
	}
	if !keepsHold(reply, hold) {
		r.releaseHold(ctx, activityID, userID, hold)
	}
	if reply.Code == lua.ReserveSoldOut && reply.HoldersVersion < 0 {
		return Result{Code: SoldOut}, nil // a false SOLD_OUT: no memo, the next request tries again
	}
	switch reply.Code {
	case lua.ReserveAdmitted:
		r.m.Created.Inc()
		f := Fields{ReservationID: id.ReservationID, MessageID: id.MessageID, RequestID: requestID,
			ActivityID: activityID, SKUID: skuID, UserID: userID, Bucket: k.Bucket, SchemaVersion: ids.SchemaVersion,
			KeyVersion: id.KeyVersion, ReservedAtMS: nowMS, DeadlineMS: reply.DeadlineMS}
		if err := r.fp.Check(failpoint.AfterRedisReserve); err != nil {
			return Result{}, err // as if the process died: the scanner must re-send
		}
		r.sendNow(ctx, k, f)
		return Result{Code: Queued, ReservationID: id.ReservationID}, nil
	case lua.ReserveDuplicate:
		rid, err := uuid.Parse(reply.ReservationID)
		if err != nil {
			return Result{}, fmt.Errorf("request map holds %q: %w", reply.ReservationID, err)
		}
		return Result{Code: Queued, ReservationID: rid, Duplicate: true, Status: reply.Status}, nil
	case lua.ReserveSoldOut:
		if r.soldOut.mark(k, now.Add(r.opt.SoldOutMemo), reply.HoldersVersion) && r.opt.SoldOutMemo > 0 {
			r.loadHolders(k)
		}
		return Result{Code: SoldOut}, nil
	case lua.ReserveAlreadyReserved:
		return r.alreadyReserved(ctx, k, reply.ReservationID, requestID)
	case lua.ReserveNotStarted:
		return Result{Code: NotStarted}, nil
	case lua.ReserveEnded:
		return Result{Code: Ended}, nil
	case lua.ReserveNotConfigured:
		return Result{Code: UnknownSale}, nil
	}
	return Result{}, fmt.Errorf("reserve script returned unknown code %d", reply.Code)
}

// knownSoldOut answers a request for a SKU known sold out: one MGET keeps
// the script's answers for the same key (a retry of an admitted request gets
// QUEUED again, a user who holds another reservation ALREADY_RESERVED)
// without running it.
func (r *Reserver) knownSoldOut(ctx context.Context, k lua.Keys, userID int64, requestID uuid.UUID) (Result, error) {
	v, err := r.rdb.MGet(ctx, k.Request(userID, requestID.String()), k.User(userID)).Result()
	if err != nil {
		return Result{}, fmt.Errorf("read request map: %w", err)
	}
	if prior, ok := v[0].(string); ok {
		rid, err := uuid.Parse(prior)
		if err != nil {
			return Result{}, fmt.Errorf("request map holds %q: %w", prior, err)
		}
		return Result{Code: Queued, ReservationID: rid, Duplicate: true, Status: "UNKNOWN"}, nil
	}
	if holder, ok := v[1].(string); ok {
		return r.alreadyReserved(ctx, k, holder, requestID)
	}
	r.m.SoldOutMemo.Inc()
	return Result{Code: SoldOut}, nil
}

// reserveScript runs reserve.lua in k's bucket. A SOLD_OUT there while a
// sibling bucket has stock, or while units are in flight between buckets,
// moves some here on demand (refill.go) and runs it again, at most
// maxRefills times. A SOLD_OUT still answered then, or one a Redis error
// left undecided, is returned with HoldersVersion -1 (not to be memoised);
// the first kind is counted as false.
func (r *Reserver) reserveScript(ctx context.Context, sku lua.SKU, k lua.Keys, args lua.ReserveArgs) (lua.ReserveReply, error) {
	reply, err := lua.Reserve(ctx, r.opt.Scripts, k, args)
	for refills := 0; err == nil && reply.Code == lua.ReserveSoldOut && sku.Buckets > 1 && !r.opt.NoRefill; refills++ {
		if refills == maxRefills {
			r.m.FalseSoldOut.Inc()
			reply.HoldersVersion = -1
			return reply, nil
		}
		rerr := r.refill(ctx, sku, k)
		if errors.Is(rerr, errNoStock) {
			break // no unit anywhere: a true SOLD_OUT
		}
		if rerr != nil && !errors.Is(rerr, errInFlight) {
			// The bucket's own answer stands; not memoised, so the next
			// request tries to move stock again.
			r.log.WarnContext(ctx, "reserve.refill_failed", "activity_id", k.ActivityID, "sku_id", k.SKUID, "bucket", k.Bucket, "error", rerr)
			reply.HoldersVersion = -1
			return reply, nil
		}
		reply, err = lua.Reserve(ctx, r.opt.Scripts, k, args)
	}
	if err != nil {
		return lua.ReserveReply{}, fmt.Errorf("reserve script: %w", err)
	}
	return reply, nil
}

// alreadyReserved tells a second reservation by the same user apart from the
// same request derived under an older ID key version.
func (r *Reserver) alreadyReserved(ctx context.Context, k lua.Keys, holder string, requestID uuid.UUID) (Result, error) {
	rid, err := uuid.Parse(holder)
	if err != nil {
		return Result{}, fmt.Errorf("user guard holds %q: %w", holder, err)
	}
	h, err := r.rdb.HMGet(ctx, k.Reservation(holder), "request_id", "status").Result()
	if err != nil {
		return Result{}, fmt.Errorf("read holder reservation: %w", err)
	}
	if s, _ := h[0].(string); s == requestID.String() {
		st, _ := h[1].(string)
		return Result{Code: Queued, ReservationID: rid, Duplicate: true, Status: st}, nil
	}
	return Result{Code: AlreadyReserved, ReservationID: rid}, nil
}

// Send outcomes, as recorded in the reservation's mq_state.
const (
	OutcomePublished = lua.OutcomePublished
	OutcomeUnknown   = lua.OutcomeUnknown
	OutcomeFailed    = lua.OutcomeFailed
)

// Send publishes the reservation's ORDER_CREATE_REQUESTED (key =
// reservation_id, fixed message_id) and classifies the outcome.
func Send(ctx context.Context, pub Publisher, topic string, f Fields) (outcome, errText string) {
	body, err := json.Marshal(f.Message())
	if err != nil {
		return OutcomeFailed, err.Error()
	}
	return classify(pub.Send(ctx, mq.Message{Topic: topic, Key: f.ReservationID.String(), ID: f.MessageID.String(),
		Tag: "ORDER_CREATE_REQUESTED", Body: body}))
}

// classify maps a send's error to the outcome recorded in mq_state.
func classify(_ mq.SendResult, err error) (outcome, errText string) {
	switch {
	case err == nil:
		return OutcomePublished, ""
	case errors.Is(err, mq.ErrSendUnknown):
		return OutcomeUnknown, err.Error()
	default:
		return OutcomeFailed, err.Error()
	}
}

// DefaultRecheckAfter is Options.RecheckAfter's default.
const DefaultRecheckAfter = time.Minute

// Sent is one recorded send outcome of a reservation.
type Sent struct {
	Outcome string
	// NextDue is when to send again after UNKNOWN or FAILED.
	NextDue time.Time
	// Recheck is when to look again after PUBLISHED, should the reservation
	// still be unsettled (no order projected, no compensation) by then.
	Recheck time.Time
	ErrText string
}

// Send states MarkSent returns besides the outcomes.
const (
	// StateSettled: the reservation left RESERVED; it is out of send_due.
	StateSettled = "SETTLED"
	// StateMissing: the reservation hash is gone (counted; reconciliation owns it).
	StateMissing = "MISSING"
	// StatePending: the message is not on the broker yet (the last send failed).
	StatePending = "PENDING"
)

// MarkSent records a send outcome with lua/send_done.lua and returns the
// reservation's mq_state afterwards (PUBLISHED, UNKNOWN, PENDING), or
// StateSettled / StateMissing.
func MarkSent(ctx context.Context, rdb redis.Scripter, k lua.Keys, rid uuid.UUID, s Sent) (string, error) {
	res, err := lua.SendDone(ctx, rdb, k, sendDoneArgs(s, []lua.SendDoneItem{{ReservationID: rid.String(), RecheckMS: s.Recheck.UnixMilli()}}))
	if err != nil {
		return "", fmt.Errorf("record send outcome: %w", err)
	}
	return res[0].State, nil
}

// sendDoneArgs are the arguments of one send_done.lua call: s's outcome
// (its Recheck is per item) for items.
func sendDoneArgs(s Sent, items []lua.SendDoneItem) lua.SendDoneArgs {
	if len(s.ErrText) > 500 {
		s.ErrText = s.ErrText[:500]
	}
	return lua.SendDoneArgs{Outcome: s.Outcome, NextDueMS: s.NextDue.UnixMilli(), ErrText: s.ErrText, Items: items}
}

// RecheckAt is when a reservation published now is looked at again if it is
// still unsettled: after its business deadline plus after.
func RecheckAt(deadlineMS int64, now time.Time, after time.Duration) time.Time {
	return time.UnixMilli(max(deadlineMS, now.UnixMilli())).Add(after)
}
