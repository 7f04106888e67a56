package invariants

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// ErrUnknownActivity means PostgreSQL has no SKU for the activity.
var ErrUnknownActivity = errors.New("no such activity (no SKU in sku_inventory)")

// SKUResult is the check of one SKU.
type SKUResult struct {
	SKUID      int64       `json:"sku_id"`
	Snapshot   Snapshot    `json:"snapshot"`
	Violations []Violation `json:"violations"`
}

// CheckActivity checks every SKU of activityID (`seckill check`); quiescent
// as in Check. An activity without SKUs is ErrUnknownActivity.
func CheckActivity(ctx context.Context, pool *pgxpool.Pool, rdb redis.Cmdable, activityID int64, quiescent bool) ([]SKUResult, error) {
	rows, err := pool.Query(ctx, `SELECT sku_id FROM sku_inventory WHERE activity_id = $1 ORDER BY sku_id`, activityID)
	if err != nil {
		return nil, fmt.Errorf("list SKUs of activity %d: %w", activityID, err)
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("list SKUs of activity %d: %w", activityID, err)
	}
	if len(skus) == 0 {
		return nil, fmt.Errorf("%w: %d", ErrUnknownActivity, activityID)
	}
	out := make([]SKUResult, 0, len(skus))
	for _, sku := range skus {
		s, v, err := Check(ctx, pool, rdb, activityID, sku, quiescent)
		if err != nil {
			return out, err
		}
		if v == nil {
			v = []Violation{}
		}
		out = append(out, SKUResult{SKUID: sku, Snapshot: s, Violations: v})
	}
	return out, nil
}
