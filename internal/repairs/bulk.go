package repairs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/state/steps"
)

// RecordBulkItem records (or, for a retried step, records again) what bulk
// repair bulkID did to one saga.
func RecordBulkItem(ctx context.Context, db pg.Execer, bulkID string, it steps.BulkItem) error {
	return pg.Exec(ctx, db, "record bulk repair item "+it.WorkflowID, `INSERT INTO bulk_repair_item (bulk_id, workflow_id, outcome, reason) VALUES ($1, $2, $3, $4)
		ON CONFLICT (bulk_id, workflow_id) DO UPDATE SET outcome = EXCLUDED.outcome, reason = EXCLUDED.reason,
		recorded_at = clock_timestamp()`, bulkID, it.WorkflowID, it.Outcome, it.Reason)
}

// BulkItems returns up to n items of bulkID in workflow ID order after
// `after` (empty: from the start), only of outcome when it is not empty.
func BulkItems(ctx context.Context, db *pgxpool.Pool, bulkID, outcome, after string, n int) ([]steps.BulkItem, error) {
	rows, err := db.Query(ctx, `SELECT workflow_id, outcome, reason FROM bulk_repair_item
		WHERE bulk_id = $1 AND ($2 = '' OR outcome = $2) AND workflow_id > $3
		ORDER BY workflow_id LIMIT $4`, bulkID, outcome, after, n)
	if err != nil {
		return nil, fmt.Errorf("bulk repair items of %s: %w", bulkID, err)
	}
	items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[steps.BulkItem])
	if err != nil {
		return nil, fmt.Errorf("bulk repair items of %s: %w", bulkID, err)
	}
	return items, nil
}

// BulkCounts counts the items of bulkID by outcome (progress of a bulk
// repair that is still running).
func BulkCounts(ctx context.Context, db *pgxpool.Pool, bulkID string) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT outcome, count(*) FROM bulk_repair_item WHERE bulk_id = $1 GROUP BY outcome`, bulkID)
	if err != nil {
		return nil, fmt.Errorf("bulk repair counts of %s: %w", bulkID, err)
	}
	out := map[string]int{}
	var o string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&o, &n}, func() error { out[o] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("bulk repair counts of %s: %w", bulkID, err)
	}
	return out, nil
}
