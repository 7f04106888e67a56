package deadletter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/quarantine"
	"github.com/seckill/seckill/internal/reservation"
)

// ReplayOptions selects what Replay sends.
type ReplayOptions struct {
	// Group is the consumer group whose dead letters are replayed (rows'
	// consumer_group; config StarterGroup). Required.
	Group string
	// Limit bounds how many messages (message_ids) are handled, oldest first;
	// 0 means all.
	Limit int
	// DryRun reports what would be sent and changes nothing.
	DryRun bool
}

// ReplayOutcome is what Replay did with one message_id.
type ReplayOutcome string

// Replay outcomes.
const (
	// Replayed: sent once to its original topic; its rows are marked replayed.
	Replayed ReplayOutcome = "REPLAYED"
	// WouldReplay: a dry run would have sent it.
	WouldReplay ReplayOutcome = "WOULD_REPLAY"
	// Skipped: not sent and left unreplayed for a person to decide (see Detail),
	// or replayed meanwhile (or being replayed) by another run.
	Skipped ReplayOutcome = "SKIPPED"
	// Failed: the send failed or its outcome is unknown; the rows stay
	// unreplayed, so the next run sends it again (consumers dedupe by message_id).
	Failed ReplayOutcome = "FAILED"
)

// ReplayItem is one message_id handled by Replay.
type ReplayItem struct {
	MessageID string
	Topic     string
	Key       string // reservation_id
	// Copies is how many unreplayed dead-lettered rows the message_id had;
	// one send covers them all.
	Copies  int
	Outcome ReplayOutcome
	// Detail says why an item was skipped or failed.
	Detail string
	// BrokerMsgID is the broker's id of the replayed copy (Replayed only).
	BrokerMsgID string
	// ReplayCount is how many times the message_id has been replayed, this time included (Replayed only).
	ReplayCount int
}

// Report is the outcome of one Replay.
type Report struct {
	DryRun bool
	Items  []ReplayItem
	// Replayed counts Replayed items (WouldReplay ones in a dry run).
	Replayed, Skipped, Failed int
}

// ErrReplayFailed is wrapped by Replay's error when some sends failed.
var ErrReplayFailed = errors.New("deadletter: some replays failed")

// Replay re-sends every not yet replayed dead-lettered message of
// opts.Group to its original topic, exactly as the gateway sent it: same
// message_id property, key (reservation_id), tag and body. It sends once per
// message_id however many copies the DLQ held (the oldest copy's body) and
// marks all of them replayed (replayed_at, replay_count); a later run sends
// nothing for them again. Only a copy dead-lettered after the replay (the
// replayed message failed again) is replayed by a later run.
//
// No transaction is open during a send, and no row is locked across it:
// each message_id is handled under a PostgreSQL advisory lock of its own,
// held by the run's session (not by a transaction), so that concurrent runs
// do not both send it (the second one skips it) while anything else may
// read and lock its rows. Under it the unreplayed copies are read, the
// message is sent once, and the copies are marked replayed in one short
// transaction. A run that dies between the send and the mark leaves its
// rows unreplayed (the lock goes with its session): the next run sends the
// message again under the same message_id, which consumers dedupe, and
// records one replay. A row that is not a valid ORDER_CREATE_REQUESTED of
// its message_id, or whose copies carry different business payloads, is
// skipped and left for a person. A failed send (or a failed mark after it) leaves its rows
// unreplayed and makes Replay return an error wrapping ErrReplayFailed, after
// trying every message; a PostgreSQL error before a send stops it. The report
// covers what was done either way.
func Replay(ctx context.Context, pool *pgxpool.Pool, pub reservation.Publisher, opts ReplayOptions) (Report, error) {
	rep := Report{DryRun: opts.DryRun}
	if pool == nil || pub == nil {
		return rep, errors.New("deadletter replay: nil dependency")
	}
	if opts.Group == "" {
		return rep, errors.New("deadletter replay: empty group")
	}
	if opts.Limit < 0 {
		return rep, fmt.Errorf("deadletter replay: negative limit %d", opts.Limit)
	}
	var limit *int
	if opts.Limit > 0 {
		limit = &opts.Limit
	}
	ids, err := quarantine.Unreplayed(ctx, pool, opts.Group, limit)
	if err != nil {
		return rep, fmt.Errorf("list dead letters of %s: %w", opts.Group, err)
	}
	for _, id := range ids {
		it, err := replayOne(ctx, pool, pub, opts, id)
		if err != nil {
			return rep, err
		}
		rep.Items = append(rep.Items, it)
		switch it.Outcome {
		case Replayed, WouldReplay:
			rep.Replayed++
		case Skipped:
			rep.Skipped++
		case Failed:
			rep.Failed++
		}
	}
	if rep.Failed > 0 {
		return rep, fmt.Errorf("%w: %d of %d messages of %s not sent", ErrReplayFailed, rep.Failed, len(rep.Items), opts.Group)
	}
	return rep, nil
}

// dlqCopy is one unreplayed dead-lettered row.
type dlqCopy = quarantine.Copy

// replayOne handles one message_id; its error is a PostgreSQL failure
// before the send, a failed send or mark is an item with outcome Failed.
func replayOne(ctx context.Context, pool *pgxpool.Pool, pub reservation.Publisher, opts ReplayOptions, messageID string) (ReplayItem, error) {
	it := ReplayItem{MessageID: messageID}
	if opts.DryRun {
		copies, err := readCopies(ctx, pool, opts.Group, messageID)
		if err != nil {
			return it, err
		}
		if _, ok := prepare(&it, copies); ok {
			it.Outcome = WouldReplay
		}
		return it, nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return it, fmt.Errorf("replay %s: connect: %w", messageID, err)
	}
	defer conn.Release()
	held, err := lockMessage(ctx, conn, opts.Group, messageID)
	if err != nil {
		return it, err
	}
	if !held {
		it.Outcome, it.Detail = Skipped, "being replayed by another run"
		return it, nil
	}
	defer unlockMessage(ctx, conn, opts.Group, messageID)
	copies, err := readCopies(ctx, conn, opts.Group, messageID)
	if err != nil {
		return it, err
	}
	msg, ok := prepare(&it, copies)
	if !ok {
		return it, nil
	}
	res, err := pub.Send(ctx, msg) // outside any transaction
	if err != nil {
		it.Outcome, it.Detail = Failed, "send: "+err.Error()
		if errors.Is(err, mq.ErrSendUnknown) {
			it.Detail = "send outcome unknown (it may have been sent; a rerun sends it again, consumers dedupe): " + err.Error()
		}
		return it, nil
	}
	record(ctx, conn, opts.Group, copies, res.MsgID, &it)
	return it, nil
}

// prepare fills it from the copies and returns the message to send; false
// when there is nothing to send (it is then Skipped).
func prepare(it *ReplayItem, copies []dlqCopy) (mq.Message, bool) {
	it.Copies = len(copies)
	if len(copies) == 0 {
		it.Outcome, it.Detail = Skipped, "replayed meanwhile by another run"
		return mq.Message{}, false
	}
	msg, detail := replayMessage(it.MessageID, copies)
	it.Topic, it.Key = msg.Topic, msg.Key
	if detail != "" {
		it.Outcome, it.Detail = Skipped, detail
		return msg, false
	}
	return msg, true
}

// record marks the copies of a message the broker took (as brokerID)
// replayed, in one short transaction, and sets its outcome.
func record(ctx context.Context, conn *pgxpool.Conn, group string, copies []dlqCopy, brokerID string, it *ReplayItem) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		it.Outcome, it.Detail = Failed, fmt.Sprintf("sent as %s but not marked replayed: %v", brokerID, err)
		return
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // no-op after Commit
	count, err := quarantine.MarkReplayed(ctx, tx, group, it.MessageID, copies)
	if err != nil {
		// The rollback leaves every row unreplayed: a rerun sends it once more, which consumers dedupe.
		it.Outcome, it.Detail = Failed, fmt.Sprintf("sent as %s but not marked replayed: %v", brokerID, err)
		return
	}
	if err := tx.Commit(ctx); err != nil {
		// Unknown whether the mark was stored: a rerun may send it once more, which consumers dedupe.
		it.Outcome, it.Detail = Failed, fmt.Sprintf("sent as %s; marking it replayed: commit outcome unknown: %v", brokerID, err)
		return
	}
	it.Outcome, it.BrokerMsgID, it.ReplayCount = Replayed, brokerID, count
}

// The advisory lock of one message_id of one group: a pair of int4 keys, the
// first naming this use (so it does not meet another advisory lock of the
// database), the second the message. Two messages sharing a hash only make
// a concurrent run skip one of them (as being replayed), for a later run.
const (
	lockSQL   = `SELECT pg_try_advisory_lock(hashtext('seckill.deadletter.replay'), hashtext($1 || '/' || $2))`
	unlockSQL = `SELECT pg_advisory_unlock(hashtext('seckill.deadletter.replay'), hashtext($1 || '/' || $2))`
)

// lockMessage takes the message's advisory lock on conn's session if it is
// free and reports whether it did.
func lockMessage(ctx context.Context, conn *pgxpool.Conn, group, messageID string) (bool, error) {
	var held bool
	if err := conn.QueryRow(ctx, lockSQL, group, messageID).Scan(&held); err != nil {
		return false, fmt.Errorf("replay %s: lock: %w", messageID, err)
	}
	return held, nil
}

// unlockMessage drops the lock, even after ctx ended; a session that cannot
// is closed, which drops it too.
func unlockMessage(ctx context.Context, conn *pgxpool.Conn, group, messageID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, unlockSQL, group, messageID); err != nil {
		_ = conn.Conn().Close(ctx) // Release then discards the connection
	}
}

// readCopies reads the message's unreplayed copies, oldest first, without
// locking them.
func readCopies(ctx context.Context, db quarantine.DB, group, messageID string) ([]dlqCopy, error) {
	copies, err := quarantine.Copies(ctx, db, group, messageID)
	if err != nil {
		return nil, fmt.Errorf("replay %s: read its rows: %w", messageID, err)
	}
	return copies, nil
}

// replayMessage rebuilds the message the gateway sent (internal/reservation:
// topic, key = reservation_id, message_id property, tag, body) from the
// oldest copy; detail says why it must not be replayed automatically.
func replayMessage(messageID string, copies []dlqCopy) (msg mq.Message, detail string) {
	first := copies[0]
	msg = mq.Message{Topic: first.Topic, ID: messageID, Tag: events.TypeOrderCreateRequested, Body: first.Body}
	if first.Topic == "" || strings.HasPrefix(first.Topic, "%") {
		return msg, fmt.Sprintf("original topic %q is not a business topic", first.Topic)
	}
	var business []byte
	for i, c := range copies {
		m, err := events.DecodeOrderCreateRequested(c.Body)
		if err != nil {
			return msg, fmt.Sprintf("copy %d is not a valid ORDER_CREATE_REQUESTED: %v", c.ID, err)
		}
		if m.MessageID.String() != messageID {
			return msg, fmt.Sprintf("copy %d carries message_id %s in its body", c.ID, m.MessageID)
		}
		// Copies may differ in transport metadata (retry_count of a re-send),
		// never in the business payload (the inbox's payload hash).
		h := sha256.Sum256(m.BusinessBytes())
		if i == 0 {
			business, msg.Key = h[:], m.ReservationID.String()
			continue
		}
		if !bytes.Equal(h[:], business) {
			return msg, fmt.Sprintf("copies %d and %d carry different payloads under one message_id", first.ID, c.ID)
		}
		if c.Topic != first.Topic {
			return msg, fmt.Sprintf("copies %d and %d came from different topics (%s, %s)", first.ID, c.ID, first.Topic, c.Topic)
		}
	}
	return msg, ""
}
