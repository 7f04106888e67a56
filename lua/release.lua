-- release.lua: after PostgreSQL cancelled an order and released its unit,
-- give the unit back to Redis stock: committed → available, at most once
-- (marker). Fixed complexity.
--
-- KEYS[1] reservation hash  seckill:{a:s}:r:<reservation_id>
-- KEYS[2] counter hash      seckill:{a:s}:counter
-- KEYS[3] release marker    seckill:{a:s}:rel:<reservation_id>
-- ARGV[1] reservation_id  ARGV[2] release_id (fixed per order)  ARGV[3] now_ms  ARGV[4] ttl_ms
--
-- Returns {code, text}:
--   1 RELEASED   2 ALREADY_RELEASED
--  -1 RESERVATION_MISSING (nothing changed; reconciliation rebuilds counters from PostgreSQL),
--     or COUNTER_MISSING: the hash is here, the SKU's counter is not (nothing changed: no
--     script but set-up and rebuild creates a counter)
--  -4 INVALID_STATUS:<s>  (only an ORDER_CREATED projection is released)
--  -5 RELEASE_ID_CONFLICT
local marker = redis.call('GET', KEYS[3])
if marker then
    if marker == ARGV[2] then
        return {2, 'ALREADY_RELEASED'}
    end
    return {-5, 'RELEASE_ID_CONFLICT'}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 'RESERVATION_MISSING'}
end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'ORDER_CREATED' then
    return {-4, 'INVALID_STATUS:' .. tostring(status)}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 'COUNTER_MISSING'}
end
redis.call('HINCRBY', KEYS[2], 'committed', -1)
redis.call('HINCRBY', KEYS[2], 'available', 1)
redis.call('HINCRBY', KEYS[2], 'released_total', 1)
redis.call('HSET', KEYS[1], 'status', 'CANCELLED', 'released_at_ms', ARGV[3])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, 'RELEASED'}
