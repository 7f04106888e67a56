// Package inbox owns consumer_inbox: a consumer's record of every message it
// processed, keyed by (consumer_group, message_id). The order service
// (activities.CreateOrder) and the saga starter (workers/sagastarter) both
// claim a message here first, so a redelivery finds the first decision.
package inbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/platform/pg"
)

// ErrPayloadConflict means the same message_id arrived with different
// business bytes than its first delivery: nothing can decide it automatically.
var ErrPayloadConflict = errors.New("same message_id with a different payload")

// Entry is a message a consumer claims.
type Entry struct {
	Group   string
	Topic   string
	Message events.OrderCreateRequested
	// Hash is the message's payload hash (PayloadHash).
	Hash []byte
	// Code is the result_code the row starts with (e.g. PROCESSING, RECEIVED).
	Code string
}

// Record is what an earlier processing left.
type Record struct {
	Hash []byte
	Code string
	// OrderID and ExpiresAt are set when the processing created an order.
	OrderID   *uuid.UUID
	ExpiresAt *time.Time
}

// PayloadHash is the inbox hash of a message: SHA-256 of its business bytes.
func PayloadHash(m events.OrderCreateRequested) []byte {
	h := sha256.Sum256(m.BusinessBytes())
	return h[:]
}

// Claim inserts the entry's row; claimed is false when a row for the same
// (group, message_id) was already there (a redelivery or a concurrent one).
func Claim(ctx context.Context, db pg.Execer, e Entry) (claimed bool, err error) {
	m := e.Message
	n, err := pg.Moved(ctx, db, "insert inbox of message "+m.MessageID.String(), `
		INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (consumer_group, message_id) DO NOTHING`,
		e.Group, m.MessageID, e.Topic, m.EventType, m.ReservationID, m.RequestID, e.Hash, e.Code)
	return n == 1, err
}

// Lookup reads the row of (group, messageID), with the order's expiry when
// the row names an order.
func Lookup(ctx context.Context, db pg.Querier, group string, messageID uuid.UUID) (Record, error) {
	var r Record
	err := db.QueryRow(ctx, `
		SELECT i.payload_hash, i.result_code, i.order_id, o.expires_at
		FROM consumer_inbox i LEFT JOIN orders o ON o.order_id = i.order_id
		WHERE i.consumer_group = $1 AND i.message_id = $2`, group, messageID).Scan(&r.Hash, &r.Code, &r.OrderID, &r.ExpiresAt)
	if err != nil {
		return r, fmt.Errorf("read inbox %s of message %s: %w", group, messageID, err)
	}
	return r, nil
}

// Same reports whether r was written for a message with this payload hash.
func (r Record) Same(hash []byte) bool { return bytes.Equal(r.Hash, hash) }

// Exists reports whether (group, messageID) has a row: after a commit whose
// answer was lost, it says whether the transaction committed.
func Exists(ctx context.Context, db pg.Querier, group string, messageID uuid.UUID) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM consumer_inbox WHERE consumer_group = $1 AND message_id = $2)`,
		group, messageID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up inbox %s of message %s: %w", group, messageID, err)
	}
	return ok, nil
}

// Advance moves a row from one result_code to the next (compare-and-set).
// moved is false when the row was not at from: the caller re-reads it.
func Advance(ctx context.Context, db pg.Execer, group string, messageID uuid.UUID, from, to string) (moved bool, err error) {
	n, err := pg.Moved(ctx, db, fmt.Sprintf("inbox of message %s %s → %s", messageID, from, to), `
		UPDATE consumer_inbox SET result_code = $3, processed_at = clock_timestamp()
		WHERE consumer_group = $1 AND message_id = $2 AND result_code = $4`, group, messageID, to, from)
	return n == 1, err
}
