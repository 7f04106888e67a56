package inventory

import (
	"context"
	"errors"
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

// Stock is a SKU's row as sale set-up left it.
type Stock struct {
	InitialStock   int64
	AvailableStock int64
	PriceCents     int64
	Buckets        int
}

// AddSKU inserts s with stock units at priceCents in buckets Redis buckets
// (initial = available) in tx, or reads the existing row, whose stock, price
// and bucket count are kept; created says which.
func AddSKU(ctx context.Context, tx pgx.Tx, s SKU, priceCents, stock int64, buckets int) (st Stock, created bool, err error) {
	err = tx.QueryRow(ctx, `
		INSERT INTO sku_inventory (activity_id, sku_id, price_cents, initial_stock, available_stock, buckets)
		VALUES ($1, $2, $3, $4, $4, $5)
		ON CONFLICT (activity_id, sku_id) DO NOTHING
		RETURNING initial_stock, available_stock, price_cents, buckets`,
		s.ActivityID, s.SKUID, priceCents, stock, buckets).Scan(&st.InitialStock, &st.AvailableStock, &st.PriceCents, &st.Buckets)
	if err == nil {
		return st, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return st, false, fmt.Errorf("insert sku %d: %w", s.SKUID, err)
	}
	if err := tx.QueryRow(ctx, `SELECT initial_stock, available_stock, price_cents, buckets FROM sku_inventory
		WHERE activity_id = $1 AND sku_id = $2`, s.ActivityID, s.SKUID).Scan(&st.InitialStock, &st.AvailableStock, &st.PriceCents, &st.Buckets); err != nil {
		return st, false, fmt.Errorf("read sku %d: %w", s.SKUID, err)
	}
	return st, false, nil
}
