-- +goose NO TRANSACTION
-- +goose Up
-- An Idempotency-Key names one request of one user for one SKU of one sale:
-- Redis keys its request map per (activity, SKU, user, key)
-- (seckill:{a:s}:req:<user>:<key>), the reservation id is derived from the
-- same four (internal/ids), and OpenAPI says so. PostgreSQL's
-- UNIQUE (user_id, request_id) was wider: the same key sent for two SKUs
-- was admitted twice by Redis and the second order transaction failed on it
-- forever (no order, no rejection, the unit never given back). The identity
-- of a request in PostgreSQL is its reservation_id (the primary key), which
-- carries the right scope; this index keeps look-ups by the request.
-- A request admitted twice under two id key versions (Redis lost its request
-- map during a key rotation) is two reservations: the one-order-per-user
-- constraint on orders makes the second a durable rejection with its unit
-- given back.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_inventory_reservation_request
    ON inventory_reservation (activity_id, sku_id, user_id, request_id);
ALTER TABLE inventory_reservation DROP CONSTRAINT IF EXISTS inventory_reservation_user_id_request_id_key;

-- +goose Down
ALTER TABLE inventory_reservation ADD CONSTRAINT inventory_reservation_user_id_request_id_key UNIQUE (user_id, request_id);
DROP INDEX CONCURRENTLY IF EXISTS idx_inventory_reservation_request;
