-- xfer_take.lua: step 1 of a stock transfer between two buckets of one SKU
-- (docs/scale.md): take k units out of the giving bucket A and write the
-- transfer's record, in A's slot. Idempotent by transfer id. Fixed complexity.
--
-- KEYS[1] counter hash  seckill:{a:s[:A]}:counter (available, xfer_out, ...)
-- KEYS[2] record hash   seckill:{a:s[:A]}:xfer:<transfer_id>  to, k, state SENT|DONE, created_ms
-- KEYS[3] xfer_out zset seckill:{a:s[:A]}:xfer_out  SENT transfers, score = created_ms
-- ARGV[1] transfer_id  ARGV[2] to_bucket  ARGV[3] k (> 0)  ARGV[4] now_ms
--
-- The record of a SENT transfer has no TTL: it is the only trace of k units
-- out of A and not yet in the target, so it must live until xfer_close.lua
-- marks it DONE (which sets the TTL).
--
-- Returns {code, state, available}:
--   1 TAKEN            available -= k, xfer_out += k, record SENT, ZADD xfer_out
--   2 EXISTS           the record was there: nothing changed; state is its state
--  -1 SHORT            available < k: nothing written
--  -2 ID_CONFLICT      the record exists with another target or k: nothing changed
local k = tonumber(ARGV[3])
if not k or k <= 0 then
    return redis.error_reply('ERR xfer_take: k must be a positive integer')
end
local rec = redis.call('HMGET', KEYS[2], 'to', 'k', 'state')
local available = tonumber(redis.call('HGET', KEYS[1], 'available') or '0')
if rec[3] then
    if rec[1] ~= ARGV[2] or tonumber(rec[2]) ~= k then
        return {-2, rec[3], available}
    end
    return {2, rec[3], available}
end
if available < k then
    return {-1, '', available}
end
redis.call('HINCRBY', KEYS[1], 'available', -k)
redis.call('HINCRBY', KEYS[1], 'xfer_out', k)
redis.call('HSET', KEYS[2], 'to', ARGV[2], 'k', k, 'state', 'SENT', 'created_ms', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return {1, 'SENT', available - k}
