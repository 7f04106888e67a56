-- xfer_close.lua: step 3 of a stock transfer (docs/scale.md): mark the
-- giving bucket's record DONE, take it out of xfer_out and let it expire.
-- Run only once xfer_give.lua answered GIVEN or ALREADY for the same id.
-- Idempotent. Fixed complexity.
--
-- KEYS[1] record hash   seckill:{a:s[:A]}:xfer:<transfer_id>
-- KEYS[2] xfer_out zset seckill:{a:s[:A]}:xfer_out
-- ARGV[1] transfer_id  ARGV[2] ttl_ms of the DONE record
--
-- Returns {code, state}:
--   1 CLOSED           SENT -> DONE now
--   2 ALREADY_CLOSED   DONE before (taken out of xfer_out again, harmless)
--  -1 MISSING          no record (expired, or never taken): a stray xfer_out
--                      member is removed; no error
redis.call('ZREM', KEYS[2], ARGV[1])
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
    return {-1, 'MISSING'}
end
if state == 'DONE' then
    return {2, 'DONE'}
end
redis.call('HSET', KEYS[1], 'state', 'DONE')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 'DONE'}
