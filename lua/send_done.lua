-- send_done.lua: record the outcome of one send of ORDER_CREATE_REQUESTED and
-- say when the reservation is looked at next. It never gives up: a
-- reservation stays in send_due for as long as its Redis state is RESERVED
-- (order_created.lua and compensate.lua take it out when it settles), so a
-- broker outage of any length delays a request but never loses it; past its
-- business deadline reconciliation rejects it durably and gives the unit back.
-- Fixed complexity.
--
-- KEYS[1] reservation hash  seckill:{a:s}:r:<reservation_id>
-- KEYS[2] send_due zset     seckill:{a:s}:send_due
-- KEYS[3] counter hash      seckill:{a:s}:counter
-- ARGV[1] reservation_id
-- ARGV[2] outcome: PUBLISHED | UNKNOWN | FAILED
-- ARGV[3] next_due_ms  UNKNOWN/FAILED: when to send again (the caller's capped backoff)
-- ARGV[4] recheck_ms   PUBLISHED: when to look again should the reservation still be unsettled
-- ARGV[5] error text (may be empty)
--
-- Returns {code, mq_state}:
--   1 recorded; mq_state after it (PUBLISHED, UNKNOWN or PENDING)
--   3 SETTLED  the reservation already left RESERVED: removed from send_due
--  -1 MISSING  the hash is gone: removed from send_due and counted (reconciliation owns it)
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[3], 'send_missing_total', 1)
    return {-1, 'MISSING'}
end
local cur = redis.call('HMGET', KEYS[1], 'status', 'mq_state')
if cur[1] ~= 'RESERVED' then
    redis.call('ZREM', KEYS[2], ARGV[1])
    return {3, 'SETTLED'}
end
redis.call('HINCRBY', KEYS[1], 'send_attempts', 1)
if ARGV[2] == 'PUBLISHED' then
    redis.call('HSET', KEYS[1], 'mq_state', 'PUBLISHED', 'last_error', '')
    redis.call('ZADD', KEYS[2], 'XX', ARGV[4], ARGV[1])
    return {1, 'PUBLISHED'}
end
redis.call('HSET', KEYS[1], 'last_error', ARGV[5])
-- A late failure (another sender's batch, a timed-out retry) never re-queues
-- a message the broker already accepted.
if cur[2] == 'PUBLISHED' then
    return {1, 'PUBLISHED'}
end
-- UNKNOWN is not failure (seed §2.3 rule 2) and stays UNKNOWN: the message may
-- be on the broker; re-sending it with the same message_id is harmless.
local state = 'PENDING'
if ARGV[2] == 'UNKNOWN' or cur[2] == 'UNKNOWN' then
    state = 'UNKNOWN'
end
redis.call('HSET', KEYS[1], 'mq_state', state)
redis.call('ZADD', KEYS[2], 'XX', ARGV[3], ARGV[1])
return {1, state}
