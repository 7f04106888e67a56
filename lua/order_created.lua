-- order_created.lua: project "order created" onto the Redis reservation and
-- move its unit from open_reserved to committed, exactly once (docs/spec.md#projection).
-- Fixed complexity.
--
-- KEYS[1] reservation hash  seckill:{a:s}:r:<reservation_id>
-- KEYS[2] counter hash      seckill:{a:s}:counter
-- KEYS[3] send_due zset     seckill:{a:s}:send_due (the reservation is settled: no more sends)
-- ARGV[1] reservation_id    ARGV[2] order_id
--
-- Returns {code, status}:
--   1 projected now   2 already projected (idempotent)
--  -1 reservation hash missing: nothing changed (reconciliation rebuilds it from PostgreSQL);
--     text RESERVATION_MISSING, or COUNTER_MISSING when the hash is here but the SKU's
--     counter is not (no script but set-up and rebuild creates a counter)
--  -2 reservation_id mismatch
--  -4 reservation in a state that cannot take an order (e.g. COMPENSATED): conflict, nothing changed
if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'ORDER_CREATED' then
    redis.call('ZREM', KEYS[3], ARGV[1])
    return {2, status}
end
if status ~= 'RESERVED' then
    return {-4, tostring(status)}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'COUNTER_MISSING'}
end
redis.call('HSET', KEYS[1], 'status', 'ORDER_CREATED', 'order_id', ARGV[2])
redis.call('HINCRBY', KEYS[2], 'open_reserved', -1)
redis.call('HINCRBY', KEYS[2], 'committed', 1)
redis.call('ZREM', KEYS[3], ARGV[1])
return {1, 'ORDER_CREATED'}
