// Package quarantine owns message_quarantine: the messages the saga starter
// refused and the ones the broker dead-lettered, kept whole and counted
// (docs/spec.md), and the dead letters' replay marks (workers/deadletter).
package quarantine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// message_quarantine.source: who wrote the row.
const (
	SourceConsumer = "CONSUMER" // the saga starter refused it
	SourceDLQ      = "DLQ"      // the broker dead-lettered it
)

// DB is what a pool, a connection and a transaction offer.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Message is one row to keep.
type Message struct {
	Group       string // consumer group
	Topic       string
	MessageID   string
	BrokerMsgID string
	Reason      string
	PayloadHash []byte
	Body        []byte
	Source      string // SourceConsumer or SourceDLQ
	// ReconsumeTimes is the broker's count of failed deliveries (dead
	// letters only; nil for SourceConsumer).
	ReconsumeTimes *int
}

// Insert keeps m, once per (group, broker message), and reports whether
// this call wrote it (false: the same broker message was kept already).
func Insert(ctx context.Context, db DB, m Message) (bool, error) {
	if m.Source != SourceConsumer && m.Source != SourceDLQ {
		return false, fmt.Errorf("quarantine message %s: source %q is neither %s nor %s", m.MessageID, m.Source, SourceConsumer, SourceDLQ)
	}
	if m.Body == nil {
		return false, errors.New("quarantine message " + m.MessageID + ": nil body")
	}
	tag, err := db.Exec(ctx, `
		INSERT INTO message_quarantine (consumer_group, topic, message_id, broker_msg_id, reason, payload_hash, body, source, reconsume_times)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (consumer_group, broker_msg_id) DO NOTHING`,
		m.Group, m.Topic, m.MessageID, m.BrokerMsgID, m.Reason, m.PayloadHash, m.Body, m.Source, m.ReconsumeTimes)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// Unreplayed lists the message_ids of group's dead letters not replayed
// yet, oldest first, at most limit (nil: all).
func Unreplayed(ctx context.Context, db DB, group string, limit *int) ([]string, error) {
	rows, err := db.Query(ctx, `
		SELECT message_id FROM message_quarantine
		WHERE source = $1 AND consumer_group = $2 AND replayed_at IS NULL
		GROUP BY message_id ORDER BY min(created_at), message_id LIMIT $3`, SourceDLQ, group, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Copy is one unreplayed dead-lettered row of a message.
type Copy struct {
	ID    int64 // quarantine_id
	Topic string
	Body  []byte
}

// Copies reads the unreplayed copies of group's dead letter messageID,
// oldest first, without locking them.
func Copies(ctx context.Context, db DB, group, messageID string) ([]Copy, error) {
	rows, err := db.Query(ctx, `
		SELECT quarantine_id, topic, body FROM message_quarantine
		WHERE source = $1 AND consumer_group = $2 AND message_id = $3 AND replayed_at IS NULL
		ORDER BY created_at, quarantine_id`, SourceDLQ, group, messageID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Copy, error) {
		var c Copy
		return c, r.Scan(&c.ID, &c.Topic, &c.Body)
	})
}

// MarkReplayed marks copies of group's dead letter messageID replayed and
// returns the message_id's replay count (across the copies of earlier
// replays too). Copies marked meanwhile fail it: a half-marked replay is
// never reported done.
func MarkReplayed(ctx context.Context, tx pgx.Tx, group, messageID string, copies []Copy) (int, error) {
	ids := make([]int64, len(copies))
	for i, c := range copies {
		ids[i] = c.ID
	}
	rows, err := tx.Query(ctx, `
		WITH n AS (
			SELECT coalesce(max(replay_count), 0) + 1 AS n FROM message_quarantine
			WHERE source = $1 AND consumer_group = $2 AND message_id = $3)
		UPDATE message_quarantine SET replayed_at = clock_timestamp(), replay_count = (SELECT n FROM n)
		WHERE quarantine_id = ANY($4) AND replayed_at IS NULL
		RETURNING replay_count`, SourceDLQ, group, messageID, ids)
	if err != nil {
		return 0, err
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return 0, err
	}
	if len(counts) != len(ids) {
		// Some were marked meanwhile (by hand, or by a run that took the lock
		// after this one's session was lost).
		return 0, fmt.Errorf("marked %d of %d rows", len(counts), len(ids))
	}
	return counts[0], nil
}
