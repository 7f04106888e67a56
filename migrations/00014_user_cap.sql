-- +goose Up
-- A per-user cap per sale (docs/spec.md#user-cap): sale_activity.max_per_user
-- (default 1, at most the sale's SKU limit of internal/sale, 1000), and the
-- order transaction refuses an order while the user already holds that many
-- live reservations of the sale (RESERVED, ORDER_CREATED, MANUAL_REVIEW),
-- with reason USER_CAP_REACHED, by the durable rejection every other refusal
-- takes, so its unit goes back to Redis by the standard compensation. Redis
-- admission enforces the cap first (lua/hold.lua); this is the backstop for
-- what Redis lost or a gateway raced.
--
-- The function keeps its 18 parameters (the cap is read from sale_activity),
-- so the 19-parameter forwarder of 00012 and the failpoint wrapper of
-- internal/orders/failpoints.sql call the new body unchanged. The body is
-- 00012's with the cap check before the order block.
ALTER TABLE sale_activity ADD COLUMN max_per_user integer NOT NULL DEFAULT 1
    CHECK (max_per_user BETWEEN 1 AND 1000);

-- +goose StatementBegin
-- seckill_user_holds counts the reservations of (activity, user) on SKUs
-- other than p_sku_id that hold or bought a unit (one on the same SKU is the
-- per-SKU rule's: DUPLICATE_ORDER), under a transaction-level
-- advisory lock of (activity, user): two order transactions of one user
-- count one after the other, each seeing the other's commit (a statement of
-- READ COMMITTED takes a fresh snapshot). The lock is held to the commit.
CREATE OR REPLACE FUNCTION seckill_user_holds(p_activity_id bigint, p_user_id bigint, p_sku_id bigint)
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_held bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('seckill_user_cap:' || p_activity_id || ':' || p_user_id, 0));
    SELECT count(*) INTO v_held FROM inventory_reservation r
    WHERE r.user_id = p_user_id AND r.activity_id = p_activity_id AND r.sku_id <> p_sku_id
      AND r.status IN ('RESERVED', 'ORDER_CREATED', 'MANUAL_REVIEW');
    RETURN v_held;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION seckill_create_order(
    p_group text, p_topic text, p_message_id uuid, p_event_type text,
    p_reservation_id uuid, p_request_id uuid, p_activity_id bigint, p_sku_id bigint, p_user_id bigint,
    p_reserved_at timestamptz, p_deadline timestamptz, p_hash bytea,
    p_order_id uuid, p_order_event_id uuid, p_ledger_key text,
    p_comp_task_id uuid, p_comp_key text, p_comp_event_id uuid,
    OUT o_outcome text, OUT o_reason text, OUT o_order_id uuid, OUT o_expires_at timestamptz,
    OUT o_duplicate boolean, OUT o_hash bytea, OUT o_code text)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_status text;
    v_order  uuid;
    v_now    timestamptz;
    v_price  bigint;
    v_cap    integer;
BEGIN
    o_duplicate := false;
    INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
    VALUES (p_group, p_message_id, p_topic, p_event_type, p_reservation_id, p_request_id, p_hash, 'PROCESSING')
    ON CONFLICT (consumer_group, message_id) DO NOTHING;
    IF NOT FOUND THEN
        o_duplicate := true;
        SELECT i.payload_hash, i.result_code, i.order_id, o.expires_at INTO o_hash, o_code, o_order_id, o_expires_at
        FROM consumer_inbox i LEFT JOIN orders o ON o.order_id = i.order_id
        WHERE i.consumer_group = p_group AND i.message_id = p_message_id;
        RETURN;
    END IF;

    INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
    VALUES (p_reservation_id, p_request_id, p_activity_id, p_sku_id, p_user_id, p_message_id, 'RESERVED', p_reserved_at, p_deadline)
    ON CONFLICT (reservation_id) DO NOTHING;
    SELECT r.status, r.order_id INTO STRICT v_status, v_order
    FROM inventory_reservation r WHERE r.reservation_id = p_reservation_id FOR UPDATE;

    IF v_status = 'ORDER_CREATED' THEN
        o_outcome := 'ORDER_CREATED';
        o_order_id := v_order;
        SELECT o.expires_at INTO STRICT o_expires_at FROM orders o WHERE o.order_id = v_order;
    ELSIF v_status IN ('ORDER_REJECTED', 'COMPENSATING', 'COMPENSATED', 'CANCELLED') THEN
        -- A durable decision came first: no order, and its compensation task
        -- (fixed key) is the only compensation.
        o_outcome := 'LATE_AFTER_COMPENSATION';
        o_reason := 'LATE_AFTER_' || v_status;
    ELSIF v_status = 'MANUAL_REVIEW' THEN
        o_outcome := 'MANUAL_REVIEW';
        o_reason := 'RESERVATION_UNDER_REVIEW';
    ELSIF v_status <> 'RESERVED' THEN
        RAISE EXCEPTION 'reservation % in unknown status %', p_reservation_id, v_status;
    ELSE
        SELECT clock_timestamp(), clock_timestamp() + make_interval(secs => a.payment_timeout_seconds), i.price_cents,
               a.max_per_user
        INTO v_now, o_expires_at, v_price, v_cap
        FROM sale_activity a JOIN sku_inventory i ON i.activity_id = a.activity_id
        WHERE a.activity_id = p_activity_id AND i.sku_id = p_sku_id;
        IF NOT FOUND THEN
            o_reason := 'UNKNOWN_SKU';
        ELSIF v_now > p_deadline THEN
            -- Past the hard business deadline, not merely slow (docs/spec.md#business-deadline).
            o_reason := 'BUSINESS_DEADLINE_EXCEEDED';
        ELSIF seckill_user_holds(p_activity_id, p_user_id, p_sku_id) >= v_cap THEN
            -- The user holds max_per_user reservations of the sale already (docs/spec.md#user-cap).
            o_reason := 'USER_CAP_REACHED';
        ELSE
            BEGIN
                INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at)
                VALUES (p_order_id, p_activity_id, p_sku_id, p_user_id, p_request_id, p_reservation_id, v_price, 'CREATED', o_expires_at)
                ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'DUPLICATE_ORDER' USING ERRCODE = 'SK002';
                END IF;
                INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied)
                VALUES (p_ledger_key, p_activity_id, p_sku_id, p_reservation_id, p_order_id, 'OCCUPY', -1, 1);
                UPDATE inventory_reservation
                SET status = 'ORDER_CREATED', order_id = p_order_id, version = version + 1, updated_at = clock_timestamp()
                WHERE reservation_id = p_reservation_id AND status = 'RESERVED';
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'reservation % RESERVED → ORDER_CREATED: no row moved', p_reservation_id;
                END IF;
                INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
                VALUES (p_order_event_id, 'ORDER', p_order_id, 'ORDER_CREATED', 1, p_reservation_id::text, jsonb_build_object(
                    'order_id', p_order_id, 'reservation_id', p_reservation_id, 'activity_id', p_activity_id, 'sku_id', p_sku_id,
                    'user_id', p_user_id, 'amount_cents', v_price, 'expires_at', o_expires_at,
                    'event_id', p_order_event_id, 'event_type', 'ORDER_CREATED', 'schema_version', 1))
                ON CONFLICT (event_id) DO NOTHING;
                UPDATE consumer_inbox SET result_code = 'ORDER_CREATED', order_id = p_order_id, processed_at = clock_timestamp()
                WHERE consumer_group = p_group AND message_id = p_message_id;
                -- Last: the hot row is locked from here to the commit only.
                UPDATE sku_inventory
                SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1,
                    version = version + 1, updated_at = clock_timestamp()
                WHERE activity_id = p_activity_id AND sku_id = p_sku_id AND available_stock > 0;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'STOCK_EXHAUSTED' USING ERRCODE = 'SK002';
                END IF;
                o_outcome := 'ORDER_CREATED';
                o_order_id := p_order_id;
                RETURN;
            EXCEPTION WHEN SQLSTATE 'SK002' THEN
                o_reason := SQLERRM; -- DUPLICATE_ORDER or STOCK_EXHAUSTED; the block's writes are undone
            END;
        END IF;
        -- Durable rejection (docs/spec.md#durable-rejection).
        o_outcome := 'ORDER_REJECTED';
        o_expires_at := NULL;
        UPDATE inventory_reservation
        SET status = 'ORDER_REJECTED', reason_code = o_reason, version = version + 1, updated_at = clock_timestamp()
        WHERE reservation_id = p_reservation_id AND status = 'RESERVED';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'reservation % RESERVED → ORDER_REJECTED: no row moved', p_reservation_id;
        END IF;
        INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
        VALUES (p_comp_task_id, p_reservation_id, 'RELEASE_REDIS_RESERVATION', p_comp_key)
        ON CONFLICT (idempotency_key) DO NOTHING;
        INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
        VALUES (p_comp_event_id, 'RESERVATION', p_reservation_id, 'RESERVATION_COMPENSATE_REQUIRED', 1, p_reservation_id::text,
            jsonb_build_object('reservation_id', p_reservation_id, 'activity_id', p_activity_id, 'sku_id', p_sku_id,
                'reason', o_reason, 'event_id', p_comp_event_id, 'event_type', 'RESERVATION_COMPENSATE_REQUIRED', 'schema_version', 1))
        ON CONFLICT (event_id) DO NOTHING;
    END IF;
    UPDATE consumer_inbox
    SET result_code = o_outcome || coalesce(':' || o_reason, ''), order_id = o_order_id, processed_at = clock_timestamp()
    WHERE consumer_group = p_group AND message_id = p_message_id;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
-- 00012's function, whole, then the helper and the column dropped.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION seckill_create_order(
    p_group text, p_topic text, p_message_id uuid, p_event_type text,
    p_reservation_id uuid, p_request_id uuid, p_activity_id bigint, p_sku_id bigint, p_user_id bigint,
    p_reserved_at timestamptz, p_deadline timestamptz, p_hash bytea,
    p_order_id uuid, p_order_event_id uuid, p_ledger_key text,
    p_comp_task_id uuid, p_comp_key text, p_comp_event_id uuid,
    OUT o_outcome text, OUT o_reason text, OUT o_order_id uuid, OUT o_expires_at timestamptz,
    OUT o_duplicate boolean, OUT o_hash bytea, OUT o_code text)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_status text;
    v_order  uuid;
    v_now    timestamptz;
    v_price  bigint;
BEGIN
    o_duplicate := false;
    INSERT INTO consumer_inbox (consumer_group, message_id, topic, event_type, reservation_id, request_id, payload_hash, result_code)
    VALUES (p_group, p_message_id, p_topic, p_event_type, p_reservation_id, p_request_id, p_hash, 'PROCESSING')
    ON CONFLICT (consumer_group, message_id) DO NOTHING;
    IF NOT FOUND THEN
        o_duplicate := true;
        SELECT i.payload_hash, i.result_code, i.order_id, o.expires_at INTO o_hash, o_code, o_order_id, o_expires_at
        FROM consumer_inbox i LEFT JOIN orders o ON o.order_id = i.order_id
        WHERE i.consumer_group = p_group AND i.message_id = p_message_id;
        RETURN;
    END IF;

    INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id, status, reserved_at, business_deadline)
    VALUES (p_reservation_id, p_request_id, p_activity_id, p_sku_id, p_user_id, p_message_id, 'RESERVED', p_reserved_at, p_deadline)
    ON CONFLICT (reservation_id) DO NOTHING;
    SELECT r.status, r.order_id INTO STRICT v_status, v_order
    FROM inventory_reservation r WHERE r.reservation_id = p_reservation_id FOR UPDATE;

    IF v_status = 'ORDER_CREATED' THEN
        o_outcome := 'ORDER_CREATED';
        o_order_id := v_order;
        SELECT o.expires_at INTO STRICT o_expires_at FROM orders o WHERE o.order_id = v_order;
    ELSIF v_status IN ('ORDER_REJECTED', 'COMPENSATING', 'COMPENSATED', 'CANCELLED') THEN
        -- A durable decision came first: no order, and its compensation task
        -- (fixed key) is the only compensation.
        o_outcome := 'LATE_AFTER_COMPENSATION';
        o_reason := 'LATE_AFTER_' || v_status;
    ELSIF v_status = 'MANUAL_REVIEW' THEN
        o_outcome := 'MANUAL_REVIEW';
        o_reason := 'RESERVATION_UNDER_REVIEW';
    ELSIF v_status <> 'RESERVED' THEN
        RAISE EXCEPTION 'reservation % in unknown status %', p_reservation_id, v_status;
    ELSE
        SELECT clock_timestamp(), clock_timestamp() + make_interval(secs => a.payment_timeout_seconds), i.price_cents
        INTO v_now, o_expires_at, v_price
        FROM sale_activity a JOIN sku_inventory i ON i.activity_id = a.activity_id
        WHERE a.activity_id = p_activity_id AND i.sku_id = p_sku_id;
        IF NOT FOUND THEN
            o_reason := 'UNKNOWN_SKU';
        ELSIF v_now > p_deadline THEN
            -- Past the hard business deadline, not merely slow (docs/spec.md#business-deadline).
            o_reason := 'BUSINESS_DEADLINE_EXCEEDED';
        ELSE
            BEGIN
                INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at)
                VALUES (p_order_id, p_activity_id, p_sku_id, p_user_id, p_request_id, p_reservation_id, v_price, 'CREATED', o_expires_at)
                ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'DUPLICATE_ORDER' USING ERRCODE = 'SK002';
                END IF;
                INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, order_id, change_type, delta_available, delta_occupied)
                VALUES (p_ledger_key, p_activity_id, p_sku_id, p_reservation_id, p_order_id, 'OCCUPY', -1, 1);
                UPDATE inventory_reservation
                SET status = 'ORDER_CREATED', order_id = p_order_id, version = version + 1, updated_at = clock_timestamp()
                WHERE reservation_id = p_reservation_id AND status = 'RESERVED';
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'reservation % RESERVED → ORDER_CREATED: no row moved', p_reservation_id;
                END IF;
                INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
                VALUES (p_order_event_id, 'ORDER', p_order_id, 'ORDER_CREATED', 1, p_reservation_id::text, jsonb_build_object(
                    'order_id', p_order_id, 'reservation_id', p_reservation_id, 'activity_id', p_activity_id, 'sku_id', p_sku_id,
                    'user_id', p_user_id, 'amount_cents', v_price, 'expires_at', o_expires_at,
                    'event_id', p_order_event_id, 'event_type', 'ORDER_CREATED', 'schema_version', 1))
                ON CONFLICT (event_id) DO NOTHING;
                UPDATE consumer_inbox SET result_code = 'ORDER_CREATED', order_id = p_order_id, processed_at = clock_timestamp()
                WHERE consumer_group = p_group AND message_id = p_message_id;
                -- Last: the hot row is locked from here to the commit only.
                UPDATE sku_inventory
                SET available_stock = available_stock - 1, occupied_stock = occupied_stock + 1,
                    version = version + 1, updated_at = clock_timestamp()
                WHERE activity_id = p_activity_id AND sku_id = p_sku_id AND available_stock > 0;
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'STOCK_EXHAUSTED' USING ERRCODE = 'SK002';
                END IF;
                o_outcome := 'ORDER_CREATED';
                o_order_id := p_order_id;
                RETURN;
            EXCEPTION WHEN SQLSTATE 'SK002' THEN
                o_reason := SQLERRM; -- DUPLICATE_ORDER or STOCK_EXHAUSTED; the block's writes are undone
            END;
        END IF;
        -- Durable rejection (docs/spec.md#durable-rejection).
        o_outcome := 'ORDER_REJECTED';
        o_expires_at := NULL;
        UPDATE inventory_reservation
        SET status = 'ORDER_REJECTED', reason_code = o_reason, version = version + 1, updated_at = clock_timestamp()
        WHERE reservation_id = p_reservation_id AND status = 'RESERVED';
        IF NOT FOUND THEN
            RAISE EXCEPTION 'reservation % RESERVED → ORDER_REJECTED: no row moved', p_reservation_id;
        END IF;
        INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key)
        VALUES (p_comp_task_id, p_reservation_id, 'RELEASE_REDIS_RESERVATION', p_comp_key)
        ON CONFLICT (idempotency_key) DO NOTHING;
        INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, schema_version, message_key, payload)
        VALUES (p_comp_event_id, 'RESERVATION', p_reservation_id, 'RESERVATION_COMPENSATE_REQUIRED', 1, p_reservation_id::text,
            jsonb_build_object('reservation_id', p_reservation_id, 'activity_id', p_activity_id, 'sku_id', p_sku_id,
                'reason', o_reason, 'event_id', p_comp_event_id, 'event_type', 'RESERVATION_COMPENSATE_REQUIRED', 'schema_version', 1))
        ON CONFLICT (event_id) DO NOTHING;
    END IF;
    UPDATE consumer_inbox
    SET result_code = o_outcome || coalesce(':' || o_reason, ''), order_id = o_order_id, processed_at = clock_timestamp()
    WHERE consumer_group = p_group AND message_id = p_message_id;
END
$fn$;
-- +goose StatementEnd

DROP FUNCTION IF EXISTS seckill_user_holds(bigint, bigint, bigint);
ALTER TABLE sale_activity DROP COLUMN max_per_user;
