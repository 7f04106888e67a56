//go:build failpoints

package orders

import (
	"context"
	_ "embed" // failpoints.sql
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// failpointsSQL installs the inner failpoints of the order transaction: a
// wrapper of seckill_create_order that names the point for its own
// transaction, and the triggers that raise SK001 there. Only this build
// carries it.
//
//go:embed failpoints.sql
var failpointsSQL string

// createFailpointSQL calls the wrapper: the function's arguments, then the
// failpoint.
const createFailpointSQL = `SELECT o_outcome, o_reason, o_order_id, o_expires_at, o_duplicate, o_hash, o_code
	FROM seckill_create_order_failpoint($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`

// createStatement is the statement of one Create: the production call when
// no inner failpoint was decided, else the wrapper with the failpoint's name,
// installed first if this database lacks it. Either way one autocommit
// statement, as in production.
func (s *Store) createStatement(ctx context.Context, failAt string) (string, []any, error) {
	if failAt == "" {
		return createSQL, nil, nil
	}
	if err := installFailpoints(ctx, s.pool); err != nil {
		return "", nil, err
	}
	return createFailpointSQL, []any{failAt}, nil
}

// prepareFailpoints installs the inner failpoints, when one is armed, before
// any Create decides which call takes it: the call that does would
// otherwise be the one slowed by the install, and lose the race for the
// last unit to a call that does not (and never reach after_pg_stock_decrement).
func (s *Store) prepareFailpoints(ctx context.Context, inner []string) error {
	if !s.fp.Armed(inner...) {
		return nil
	}
	return installFailpoints(ctx, s.pool)
}

var installed sync.Map // *pgxpool.Pool → struct{}: its database has the failpoints

// installFailpoints applies failpoints.sql to pool's database unless it is
// there. CREATE OR REPLACE TRIGGER locks the three tables; a short lock
// timeout makes the installer, never a transaction of the code under test,
// the one that gives up when they wait on each other, and it tries again.
func installFailpoints(ctx context.Context, pool *pgxpool.Pool) error {
	if _, ok := installed.Load(pool); ok {
		return nil
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = installOnce(ctx, pool); err == nil {
			installed.Store(pool, struct{}{})
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("install the order transaction's failpoints: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("install the order transaction's failpoints: %w", err)
}

func installOnce(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '500ms'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('seckill_failpoints_install'))`); err != nil {
			return err
		}
		var have bool
		if err := tx.QueryRow(ctx, `SELECT to_regproc('seckill_create_order_failpoint') IS NOT NULL
			AND (SELECT count(*) FROM pg_trigger WHERE tgname IN ('seckill_failpoint_after_inbox_insert',
				'seckill_failpoint_after_order_insert', 'seckill_failpoint_after_pg_stock_decrement')) = 3`).Scan(&have); err != nil {
			return err
		}
		if have {
			return nil
		}
		_, err := tx.Exec(ctx, failpointsSQL) // no arguments: the simple protocol, several statements
		return err
	})
}

// InstallFailpoints puts the order transaction's inner failpoints into the
// database at dsn, connected as its owner: the processes under test log in
// as the application role, which may not create functions or triggers
// (docs/deploy.md#database-roles), and find them there.
func InstallFailpoints(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	return installOnce(ctx, pool)
}
