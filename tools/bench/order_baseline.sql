-- seckill bench order, leg (a): the baseline of the order transaction, four statements on one hot SKU
-- (inbox INSERT ON CONFLICT DO NOTHING, conditional stock UPDATE, order INSERT ON CONFLICT DO NOTHING,
-- outbox INSERT) on the project's own tables, with fresh ids per transaction and a random user, so that
-- every statement writes as CreateOrder's do. pgbench runs it with -M prepared; the bench passes the other
-- variables with -D (order_pgbench.go): activity, sku, price, timeout, grp, topic, hash, payload.
\set uid random(1, 9000000000000000000)
BEGIN;
INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code) VALUES (:grp, gen_random_uuid(), :topic, 'ORDER_CREATE_REQUESTED', gen_random_uuid(), gen_random_uuid(), decode(:hash, 'hex'), 'PROCESSING') ON CONFLICT (consumer_group, message_id) DO NOTHING;
UPDATE sku_inventory SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1, version = version + 1, updated_at = clock_timestamp() WHERE activity_id = :activity AND sku_id = :sku AND available_stock > 0;
INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at) VALUES (gen_random_uuid(), :activity, :sku, :uid, gen_random_uuid(), gen_random_uuid(), :price, 'CREATED', clock_timestamp() + make_interval(secs => :timeout)) ON CONFLICT DO NOTHING;
INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload) VALUES (gen_random_uuid(), 'ORDER', gen_random_uuid(), 'ORDER_CREATED', 1, gen_random_uuid()::text, :payload::jsonb) ON CONFLICT (event_id) DO NOTHING;
END;
