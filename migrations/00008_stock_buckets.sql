-- +goose Up
-- How many Redis stock buckets a SKU's admission uses (docs/scale.md). Fixed
-- once the SKU is set up: a user's bucket is a hash of the user id modulo this
-- number, so changing it under a live sale would move users between buckets.
-- PostgreSQL's stock stays one row per SKU.
ALTER TABLE sku_inventory ADD COLUMN buckets integer NOT NULL DEFAULT 1
    CONSTRAINT sku_inventory_buckets_range CHECK (buckets BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE sku_inventory DROP COLUMN buckets;
