-- The failpoints inside the order transaction, for binaries built with
-- -tags failpoints only (internal/orders/create_failpoints.go embeds this
-- file and applies it to a database the first time such a binary arms one of
-- them; a production build has neither the file nor the code that applies
-- it). Not a goose migration: production never runs it. Idempotent.
--
-- seckill_create_order (migrations/00012) has no failpoint code. Here:
--   * seckill_create_order_failpoint(<its 18 arguments>, p_fail_at) sets
--     seckill.fail_at for its own transaction (the one autocommit statement
--     of the call) and calls seckill_create_order with the same arguments;
--   * an AFTER row trigger on each table whose write is a crash point raises
--     SQLSTATE SK001 when seckill.fail_at names that point. Row triggers fire
--     only for a row written, so each point is reached exactly where the old
--     in-function checks stood: after the inbox row is claimed (not on a
--     duplicate), after the order row is inserted (not on a conflict), after
--     the stock row is decremented (not when no unit is left).
-- Outside the wrapper seckill.fail_at is unset or empty: the triggers' WHEN
-- is false and they do nothing.

CREATE OR REPLACE FUNCTION seckill_failpoint_raise() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION 'failpoint %', TG_ARGV[0] USING ERRCODE = 'SK001';
END
$fn$;

CREATE OR REPLACE FUNCTION seckill_create_order_failpoint(
    p_group text, p_topic text, p_message_id uuid, p_event_type text,
    p_reservation_id uuid, p_request_id uuid, p_activity_id bigint, p_sku_id bigint, p_user_id bigint,
    p_reserved_at timestamptz, p_deadline timestamptz, p_hash bytea,
    p_order_id uuid, p_order_event_id uuid, p_ledger_key text,
    p_comp_task_id uuid, p_comp_key text, p_comp_event_id uuid,
    p_fail_at text,
    OUT o_outcome text, OUT o_reason text, OUT o_order_id uuid, OUT o_expires_at timestamptz,
    OUT o_duplicate boolean, OUT o_hash bytea, OUT o_code text)
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM set_config('seckill.fail_at', p_fail_at, true);
    SELECT f.o_outcome, f.o_reason, f.o_order_id, f.o_expires_at, f.o_duplicate, f.o_hash, f.o_code
    INTO o_outcome, o_reason, o_order_id, o_expires_at, o_duplicate, o_hash, o_code
    FROM seckill_create_order(p_group, p_topic, p_message_id, p_event_type,
        p_reservation_id, p_request_id, p_activity_id, p_sku_id, p_user_id,
        p_reserved_at, p_deadline, p_hash, p_order_id, p_order_event_id, p_ledger_key,
        p_comp_task_id, p_comp_key, p_comp_event_id) f;
END
$fn$;

CREATE OR REPLACE TRIGGER seckill_failpoint_after_inbox_insert AFTER INSERT ON consumer_inbox
    FOR EACH ROW WHEN (current_setting('seckill.fail_at', true) = 'after_inbox_insert')
    EXECUTE FUNCTION seckill_failpoint_raise('after_inbox_insert');

CREATE OR REPLACE TRIGGER seckill_failpoint_after_order_insert AFTER INSERT ON orders
    FOR EACH ROW WHEN (current_setting('seckill.fail_at', true) = 'after_order_insert')
    EXECUTE FUNCTION seckill_failpoint_raise('after_order_insert');

CREATE OR REPLACE TRIGGER seckill_failpoint_after_pg_stock_decrement AFTER UPDATE ON sku_inventory
    FOR EACH ROW WHEN (current_setting('seckill.fail_at', true) = 'after_pg_stock_decrement')
    EXECUTE FUNCTION seckill_failpoint_raise('after_pg_stock_decrement');
