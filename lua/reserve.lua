-- reserve.lua: admit one flash-sale request atomically (docs/spec.md#admission).
-- All keys share the hash tag {activity:sku}, so the script runs in one slot.
-- Fixed complexity: no scans, no loops.
--
-- KEYS[1] counter hash   seckill:{a:s}:counter  (initial, available, open_reserved, committed, ...)
-- KEYS[2] meta hash      seckill:{a:s}:meta     (start_ms, end_ms, order_deadline_ms)
-- KEYS[3] reservation    seckill:{a:s}:r:<reservation_id>
-- KEYS[4] request map    seckill:{a:s}:req:<user_id>:<request_id>
-- KEYS[5] user guard     seckill:{a:s}:user:<user_id>
-- KEYS[6] send_due zset  seckill:{a:s}:send_due (score = next send time, ms)
-- KEYS[7] holders hash   seckill:{a:s}:holders  user_id -> "<reservation_id> <request_id>"
--         of every user guard: what a gateway answers sold-out requests from
--         without Redis (internal/reservation/soldout.go); its version is the
--         counter's holders_version, bumped on every change
--
-- ARGV[1] reservation_id  ARGV[2] message_id     ARGV[3] request_id
-- ARGV[4] user_id         ARGV[5] activity_id    ARGV[6] sku_id
-- ARGV[7] now_ms          ARGV[8] id_key_version ARGV[9] schema_version
-- ARGV[10] ttl_ms (garbage collection only)      ARGV[11] send_due_at_ms
-- ARGV[12] bucket: the SKU's stock bucket these keys are (lua.BucketOf the
--          user; 0 for a SKU of one bucket), recorded in the reservation
--
-- Returns {code, reservation_id, detail}:
--   1  RESERVED           new reservation; detail = business_deadline_ms
--   2  DUPLICATE_REQUEST  this request was admitted before; detail = its current status
--  -1  SOLD_OUT           detail = the counter's holders_version; a SKU of
--                         several buckets also counts sold_out_hits, the
--                         demand the rebalancer moves stock to, on a counter
--                         that exists (no script but set-up and rebuild
--                         creates a counter: a missing one stays missing, so
--                         init_sku.lua and reconciliation see it as lost)
--  -2  ALREADY_RESERVED   this user holds another reservation; reservation_id = that one
--  -3  NOT_STARTED        -4  ENDED        -5  NOT_CONFIGURED

-- 1. The same request again: the same answer.
-- (A prior id that differs from ARGV[1] was derived under an older key version;
-- the caller reads its status.)
local prior = redis.call('GET', KEYS[4])
if prior then
    if prior == ARGV[1] then
        return {2, prior, redis.call('HGET', KEYS[3], 'status') or 'UNKNOWN'}
    end
    return {2, prior, 'UNKNOWN'}
end
-- Request map lost, but the reservation this request derives is still here.
if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[10])
    return {2, ARGV[1], redis.call('HGET', KEYS[3], 'status')}
end

-- 2. One reservation per user per (activity, sku).
local holder = redis.call('GET', KEYS[5])
if holder then
    if holder == ARGV[1] then
        redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[10])
        return {2, holder, 'UNKNOWN'}
    end
    return {-2, holder, 'ALREADY_RESERVED'}
end

-- 3. Sale window.
local meta = redis.call('HMGET', KEYS[2], 'start_ms', 'end_ms', 'order_deadline_ms', 'buckets')
if not meta[1] or not meta[2] or not meta[3] then
    return {-5, '', 'NOT_CONFIGURED'}
end
local now = tonumber(ARGV[7])
if now < tonumber(meta[1]) then
    return {-3, '', 'NOT_STARTED'}
end
if now >= tonumber(meta[2]) then
    return {-4, '', 'ENDED'}
end

-- 4. Stock. One read of the counters this script moves, one write of them
-- below (the script is atomic, so HSET of the read values plus the change is
-- what four HINCRBYs would do, in one command).
local c = redis.call('HMGET', KEYS[1], 'available', 'open_reserved', 'reserved_total', 'holders_version')
local available = tonumber(c[1] or '0')
if available <= 0 then
    -- a counter without 'available' is a missing counter (init_sku.lua writes it)
    if c[1] and tonumber(meta[4] or '1') > 1 then
        redis.call('HINCRBY', KEYS[1], 'sold_out_hits', 1)
    end
    return {-1, '', tonumber(c[4] or '0')}
end

-- 5. Admit: counters, reservation with every recovery field, send_due, maps.
redis.call('HSET', KEYS[1],
    'available', available - 1,
    'open_reserved', tonumber(c[2] or '0') + 1,
    'reserved_total', tonumber(c[3] or '0') + 1,
    'holders_version', tonumber(c[4] or '0') + 1)
local deadline = now + tonumber(meta[3])
redis.call('HSET', KEYS[3],
    'status', 'RESERVED',
    'mq_state', 'PENDING',
    'activity_id', ARGV[5],
    'sku_id', ARGV[6],
    'user_id', ARGV[4],
    'request_id', ARGV[3],
    'reservation_id', ARGV[1],
    'message_id', ARGV[2],
    'schema_version', ARGV[9],
    'key_version', ARGV[8],
    'reserved_at_ms', ARGV[7],
    'business_deadline_ms', deadline,
    'send_attempts', 0,
    'last_error', '',
    'bucket', ARGV[12])
redis.call('PEXPIRE', KEYS[3], ARGV[10])
redis.call('ZADD', KEYS[6], ARGV[11], ARGV[1])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[10])
redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[10])
redis.call('HSET', KEYS[7], ARGV[4], ARGV[1] .. ' ' .. ARGV[3])
redis.call('PEXPIRE', KEYS[7], ARGV[10])
return {1, ARGV[1], deadline}
