package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is what a pool, a connection and a transaction offer for writes.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Querier is what a pool, a connection and a transaction offer for reads.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotMoved means a conditional update that had to move exactly one row
// found none (or several) in the state it expected: another writer moved the
// row first, or the row is not where the caller believed.
var ErrNotMoved = errors.New("conditional update did not move exactly one row")

// MoveOne runs a conditional UPDATE that must change exactly one row. what
// names the move for the error ("order 42 → PAID"). A database error is
// wrapped with %w; a row count other than one wraps ErrNotMoved with the count.
func MoveOne(ctx context.Context, db Execer, what, sql string, args ...any) error {
	n, err := Moved(ctx, db, what, sql, args...)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%s moved %d rows: %w", what, n, ErrNotMoved)
	}
	return nil
}

// Moved runs a statement whose affected-row count is a decision (an insert
// with ON CONFLICT DO NOTHING, a compare-and-set that may lose): it returns
// the count and wraps a database error with what.
func Moved(ctx context.Context, db Execer, what, sql string, args ...any) (int64, error) {
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return tag.RowsAffected(), nil
}

// Exec runs a statement whose row count does not matter (an idempotent
// insert, a best-effort update) and wraps its error with what.
func Exec(ctx context.Context, db Execer, what, sql string, args ...any) error {
	_, err := Moved(ctx, db, what, sql, args...)
	return err
}
