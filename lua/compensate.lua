-- compensate.lua: give one rejected reservation's unit back to Redis stock,
-- at most once (docs/spec.md#compensation). Runs only after PostgreSQL durably decided the
-- compensation (reservation COMPENSATING + task claimed). Fixed complexity.
--
-- KEYS[1] reservation hash     seckill:{a:s}:r:<reservation_id>
-- KEYS[2] counter hash         seckill:{a:s}:counter (available, open_reserved, ...)
-- KEYS[3] compensation marker  seckill:{a:s}:comp:<reservation_id>
-- KEYS[4] send_due zset        seckill:{a:s}:send_due (settled: no more sends)
-- KEYS[5] user guard           seckill:{a:s}:user:<user_id>
-- KEYS[6] holders hash         seckill:{a:s}:holders (the guard's entry, see reserve.lua)
-- ARGV[1] reservation_id  ARGV[2] compensation_id  ARGV[3] now_ms  ARGV[4] marker/terminal ttl_ms
-- ARGV[5] "1": free the user's guard (held by this reservation) so the user
--         may try again: the request was rejected for being too late, not
--         for anything the user did (BUSINESS_DEADLINE_EXCEEDED)
-- ARGV[6] user_id (the guard's field in the holders hash)
--
-- Returns {code, text}:
--   1 COMPENSATED          stock restored now
--   2 ALREADY_COMPENSATED  idempotent success: stock unchanged (only settled, as with 1)
--  -1 RESERVATION_MISSING  never add stock blindly: manual / activity-level reconciliation
--  -1 COUNTER_MISSING      the reservation is here but the SKU's counter is not (Redis lost
--                          it): nothing written (no script but set-up and rebuild creates a
--                          counter); rebuild the SKU (it counts the reservation, then under
--                          review, as given back), then mark it resolved
--  -2 RESERVATION_ID_MISMATCH
--  -3 ORDER_ALREADY_EXISTS the reservation holds an order: refuse
--  -4 INVALID_STATUS:<s>
--  -5 COMPENSATION_ID_CONFLICT another compensation id already applied: manual check
if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
if redis.call('HGET', KEYS[1], 'reservation_id') ~= ARGV[1] then
    return {-2, 'RESERVATION_ID_MISMATCH'}
end
-- Settled (now or before): out of send_due, and the guard freed if asked.
local function settle()
    redis.call('ZREM', KEYS[4], ARGV[1])
    if ARGV[5] == '1' and redis.call('GET', KEYS[5]) == ARGV[1] then
        redis.call('DEL', KEYS[5])
        redis.call('HDEL', KEYS[6], ARGV[6])
        if redis.call('EXISTS', KEYS[2]) == 1 then
            redis.call('HINCRBY', KEYS[2], 'holders_version', 1)
        end
    end
end
local marker = redis.call('GET', KEYS[3])
if marker then
    if marker == ARGV[2] then
        settle()
        return {2, 'ALREADY_COMPENSATED'}
    end
    return {-5, 'COMPENSATION_ID_CONFLICT'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'COMPENSATED' then
    settle()
    return {2, 'ALREADY_COMPENSATED'}
end
if status == 'ORDER_CREATED' or status == 'PAID' or status == 'CANCEL_PENDING' then
    return {-3, 'ORDER_ALREADY_EXISTS'}
end
if status ~= 'RESERVED' and status ~= 'ORDER_REJECTED' and status ~= 'COMPENSATING' then
    return {-4, 'INVALID_STATUS:' .. tostring(status)}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'COUNTER_MISSING'}
end
redis.call('HINCRBY', KEYS[2], 'available', 1)
redis.call('HINCRBY', KEYS[2], 'open_reserved', -1)
redis.call('HINCRBY', KEYS[2], 'compensated_total', 1)
redis.call('HSET', KEYS[1], 'status', 'COMPENSATED', 'compensated_at_ms', ARGV[3], 'compensation_id', ARGV[2])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
settle()
return {1, 'COMPENSATED'}
