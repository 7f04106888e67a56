package outbox

// The relay's side of event_outbox (docs/spec.md#outbox): claim due rows by
// lease, hand back the ones not sent, record each send's outcome. Every
// write is guarded by the claim (status SENDING, lease_owner), so a row is
// left alone once another relay holds it.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/seckill/seckill/state"
)

// DB is what a pool, a connection and a transaction offer.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Claimed is one row leased to a relay.
type Claimed struct {
	EventID  uuid.UUID
	Key      string // the message key
	Type     string // event_type, the message tag
	Payload  []byte
	Attempts int  // attempt_count, this claim's attempt included
	Reclaim  bool // it was SENDING under another claim whose lease ran out
}

// Claim leases up to batch due rows (PENDING, RETRY, or SENDING with an
// expired lease, whose next_retry_at has come) to owner for lease, FOR UPDATE
// SKIP LOCKED, counting an attempt on each. The rows come in the order they
// fell due, so a relay that sends only the first few (its lease covers no
// more) and hands back the rest, which keep their place, starves none.
func Claim(ctx context.Context, db DB, batch int, owner string, lease time.Duration) ([]Claimed, error) {
	rows, err := db.Query(ctx, `
		WITH candidates AS (
			SELECT event_id, status AS prev_status, next_retry_at, created_at FROM event_outbox
			WHERE (status IN ('PENDING', 'RETRY') OR (status = 'SENDING' AND lease_until < clock_timestamp()))
			  AND next_retry_at <= clock_timestamp()
			ORDER BY next_retry_at, created_at
			FOR UPDATE SKIP LOCKED
			LIMIT $1
		),
		claimed AS (
			UPDATE event_outbox AS o
			SET status = 'SENDING', lease_owner = $2, lease_until = clock_timestamp() + $3::interval,
			    attempt_count = attempt_count + 1
			FROM candidates c
			WHERE o.event_id = c.event_id
			RETURNING o.event_id, o.message_key, o.event_type, o.payload::text AS payload, o.attempt_count,
			          c.prev_status = 'SENDING' AS reclaim, c.next_retry_at, c.created_at)
		SELECT event_id, message_key, event_type, payload, attempt_count, reclaim FROM claimed
		ORDER BY next_retry_at, created_at, event_id`,
		batch, owner, lease.String())
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	batchRows, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		var payload string
		err := row.Scan(&c.EventID, &c.Key, &c.Type, &payload, &c.Attempts, &c.Reclaim)
		c.Payload = []byte(payload)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox batch: %w", err)
	}
	return batchRows, nil
}

// HandBack returns owner's claimed rows ids, whose send was not begun: the
// claim's attempt is taken back and they are due at once, for any relay.
// Rows no longer owner's are left alone. It returns how many it handed back.
func HandBack(ctx context.Context, db DB, owner string, ids []uuid.UUID) (int64, error) {
	tag, err := db.Exec(ctx, `
		UPDATE event_outbox SET status = CASE WHEN attempt_count <= 1 THEN 'PENDING' ELSE 'RETRY' END,
		       attempt_count = attempt_count - 1, lease_owner = NULL, lease_until = NULL
		WHERE event_id = ANY($1) AND status = 'SENDING' AND lease_owner = $2`, ids, owner)
	if err != nil {
		return 0, fmt.Errorf("hand back %d outbox rows: %w", len(ids), err)
	}
	return tag.RowsAffected(), nil
}

// MarkSent records that owner's claimed row id reached the broker.
func MarkSent(ctx context.Context, db DB, owner string, id uuid.UUID) error {
	if _, err := db.Exec(ctx, `
		UPDATE event_outbox SET status = 'SENT', sent_at = clock_timestamp(), lease_owner = NULL, lease_until = NULL, last_error = NULL
		WHERE event_id = $1 AND status = 'SENDING' AND lease_owner = $2`, id, owner); err != nil {
		return fmt.Errorf("outbox %s → SENT: %w", id, err)
	}
	return nil
}

// MarkFailed records a failed send of owner's claimed row id: status
// (RETRY, or MANUAL when out of attempts), due again after retryIn, with the
// error (cut to 500 bytes).
func MarkFailed(ctx context.Context, db DB, owner string, id uuid.UUID, status state.Outbox, retryIn time.Duration, lastErr string) error {
	if status != state.OutboxRetry && status != state.OutboxManual {
		return fmt.Errorf("outbox %s: a failed send goes to RETRY or MANUAL, not %q", id, status)
	}
	if _, err := db.Exec(ctx, `
		UPDATE event_outbox SET status = $3, next_retry_at = clock_timestamp() + $4::interval,
		       lease_owner = NULL, lease_until = NULL, last_error = $5
		WHERE event_id = $1 AND status = 'SENDING' AND lease_owner = $2`,
		id, owner, status.String(), retryIn.String(), truncate(lastErr, 500)); err != nil {
		return fmt.Errorf("outbox %s → %s: %w", id, status, err)
	}
	return nil
}

// Backlog is how many rows are not sent yet and the age of the oldest (0: none).
func Backlog(ctx context.Context, db DB) (rows int64, oldest time.Duration, err error) {
	var age float64
	if err := db.QueryRow(ctx, `
		SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)
		FROM event_outbox WHERE status IN ('PENDING', 'RETRY', 'SENDING')`).Scan(&rows, &age); err != nil {
		return 0, 0, fmt.Errorf("read outbox backlog: %w", err)
	}
	return rows, time.Duration(age * float64(time.Second)), nil
}

// Expired is a SENDING row whose lease ran out (its relay died or stalled).
type Expired struct {
	EventID  uuid.UUID
	Attempts int64
	Owner    *string // lease_owner
}

// ExpiredLeases lists the SENDING rows whose lease ended before before.
func ExpiredLeases(ctx context.Context, db DB, before time.Time) ([]Expired, error) {
	rows, err := db.Query(ctx, `SELECT event_id, attempt_count, lease_owner FROM event_outbox
		WHERE status = 'SENDING' AND lease_until < $1`, before)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Expired, error) {
		var e Expired
		err := row.Scan(&e.EventID, &e.Attempts, &e.Owner)
		return e, err
	})
}

// RetryExpired makes row id, SENDING under a lease that ended before
// before, due again at once (RETRY); it returns the rows moved (0: taken or
// sent meanwhile).
func RetryExpired(ctx context.Context, db DB, id uuid.UUID, before time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `UPDATE event_outbox SET status = 'RETRY', lease_owner = NULL, lease_until = NULL,
		next_retry_at = clock_timestamp() WHERE event_id = $1 AND status = 'SENDING' AND lease_until < $2`, id, before)
	return tag.RowsAffected(), err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
