-- xfer_give.lua: step 2 of a stock transfer (docs/scale.md): give the k units
-- taken by xfer_take.lua to the receiving bucket B, at most once per transfer
-- id, in B's slot. The marker is the fact that the transfer was applied: a
-- SENT record is re-given with its id, never rolled back. Fixed complexity.
--
-- KEYS[1] counter hash  seckill:{a:s[:B]}:counter (available, xfer_in, ...)
-- KEYS[2] marker        seckill:{a:s[:B]}:xin:<transfer_id>  "<from_bucket>:<k>"
-- ARGV[1] transfer_id  ARGV[2] from_bucket  ARGV[3] k (> 0)  ARGV[4] marker ttl_ms
--         (it must outlive every retry of this step: the reservation TTL)
--
-- Returns {code, available}:
--   1 GIVEN            available += k, xfer_in += k, marker set
--   2 ALREADY          the marker was there: nothing changed
--  -1 COUNTER_MISSING  B has no counter (Redis lost it, or a rebuild is due):
--                      nothing written; the record stays SENT and is retried
local k = tonumber(ARGV[3])
if not k or k <= 0 then
    return redis.error_reply('ERR xfer_give: k must be a positive integer')
end
if redis.call('EXISTS', KEYS[2]) == 1 then
    return {2, tonumber(redis.call('HGET', KEYS[1], 'available') or '0')}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1, 0}
end
local available = redis.call('HINCRBY', KEYS[1], 'available', k)
redis.call('HINCRBY', KEYS[1], 'xfer_in', k)
redis.call('SET', KEYS[2], ARGV[2] .. ':' .. ARGV[3], 'PX', ARGV[4])
return {1, available}
