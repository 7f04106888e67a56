-- xfer_close.lua: step 3 of a stock transfer (docs/scale.md): mark the
-- giving bucket's record DONE, take it out of xfer_out, let it expire, and
-- list it in xfer_closed (where reconciliation looks for a give the
-- receiving bucket lost after this close). Run only once xfer_give.lua
-- answered GIVEN or ALREADY for the same id. Idempotent. Fixed complexity
-- (amortised: each id is added to xfer_closed once and trimmed once).
--
-- KEYS[1] record hash      seckill:{a:s[:A]}:xfer:<transfer_id>
-- KEYS[2] xfer_out zset    seckill:{a:s[:A]}:xfer_out
-- KEYS[3] xfer_closed zset seckill:{a:s[:A]}:xfer_closed  DONE ids, score = created_ms
-- ARGV[1] transfer_id  ARGV[2] ttl_ms of the DONE record (the markers' TTL)
--
-- Returns {code, state}:
--   1 CLOSED           SENT -> DONE now (and listed in xfer_closed; ids
--                      taken more than ttl_ms before this one are trimmed:
--                      their markers may have expired)
--   2 ALREADY_CLOSED   DONE before (taken out of xfer_out again, harmless)
--  -1 MISSING          no record (expired, or never taken): a stray xfer_out
--                      member is removed; no error
redis.call('ZREM', KEYS[2], ARGV[1])
local rec = redis.call('HMGET', KEYS[1], 'state', 'created_ms')
if not rec[1] then
    return {-1, 'MISSING'}
end
if rec[1] == 'DONE' then
    return {2, 'DONE'}
end
redis.call('HSET', KEYS[1], 'state', 'DONE')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local created = tonumber(rec[2]) or 0
redis.call('ZADD', KEYS[3], created, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (created - tonumber(ARGV[2])))
return {1, 'DONE'}
