package inventory

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/platform/pg"
)

// SKU names one sku_inventory row.
type SKU struct {
	ActivityID int64
	SKUID      int64
}

// Sell moves a paid order's unit occupied → sold, with its ledger row.
func Sell(ctx context.Context, tx pgx.Tx, s SKU, rid, orderID uuid.UUID) error {
	if err := pg.MoveOne(ctx, tx, fmt.Sprintf("stock occupied → sold for %s", orderID), `
		UPDATE sku_inventory SET occupied_stock = occupied_stock - 1, sold_stock = sold_stock + 1,
		       version = version + 1, updated_at = clock_timestamp()
		WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0`, s.ActivityID, s.SKUID); err != nil {
		return err
	}
	return pg.Exec(ctx, tx, "ledger sell of "+orderID.String(), `
		INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_occupied, delta_sold)
		VALUES ($1, $2, $3, $4, $5, 'SELL', -1, 1)`,
		"SELL:"+orderID.String(), s.ActivityID, s.SKUID, rid, orderID)
}

// Release moves a cancelled order's unit occupied → available, with its
// ledger row.
func Release(ctx context.Context, tx pgx.Tx, s SKU, rid, orderID uuid.UUID) error {
	if err := pg.MoveOne(ctx, tx, fmt.Sprintf("release stock of %s", orderID), `
		UPDATE sku_inventory SET occupied_stock = occupied_stock - 1, available_stock = available_stock + 1,
		       version = version + 1, updated_at = clock_timestamp()
		WHERE activity_id = $1 AND sku_id = $2 AND occupied_stock > 0`, s.ActivityID, s.SKUID); err != nil {
		return err
	}
	return pg.Exec(ctx, tx, "ledger release of "+orderID.String(), `
		INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied)
		VALUES ($1, $2, $3, $4, $5, 'RELEASE', 1, -1)`,
		"RELEASE:"+orderID.String(), s.ActivityID, s.SKUID, rid, orderID)
}
