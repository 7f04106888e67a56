-- send_done.lua: record the outcome of one send of ORDER_CREATE_REQUESTED.
-- Fixed complexity.
--
-- KEYS[1] reservation hash  seckill:{a:s}:r:<reservation_id>
-- KEYS[2] send_due zset     seckill:{a:s}:send_due
-- KEYS[3] counter hash      seckill:{a:s}:counter
-- ARGV[1] reservation_id
-- ARGV[2] outcome: PUBLISHED | UNKNOWN | FAILED
-- ARGV[3] next_due_ms (UNKNOWN/FAILED: when to try again)
-- ARGV[4] max_attempts    ARGV[5] error text (may be empty)
--
-- Returns {code, mq_state}:
--   1 recorded   2 gave up: attempts exhausted, mq_state=GAVE_UP (visible, counted)
--  -1 reservation hash missing (item removed from send_due; reconciliation owns it)
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[3], 'send_missing_total', 1)
    return {-1, 'MISSING'}
end
local attempts = redis.call('HINCRBY', KEYS[1], 'send_attempts', 1)
if ARGV[2] == 'PUBLISHED' then
    redis.call('HSET', KEYS[1], 'mq_state', 'PUBLISHED', 'last_error', '')
    redis.call('ZREM', KEYS[2], ARGV[1])
    return {1, 'PUBLISHED'}
end
redis.call('HSET', KEYS[1], 'last_error', ARGV[5])
if attempts >= tonumber(ARGV[4]) then
    redis.call('HSET', KEYS[1], 'mq_state', 'GAVE_UP')
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[3], 'send_gave_up_total', 1)
    return {2, 'GAVE_UP'}
end
-- UNKNOWN is not failure (seed §2.3 rule 2): the message may be on the broker;
-- re-sending with the same message_id is harmless.
if ARGV[2] == 'UNKNOWN' or redis.call('HGET', KEYS[1], 'mq_state') ~= 'UNKNOWN' then
    redis.call('HSET', KEYS[1], 'mq_state', ARGV[2] == 'UNKNOWN' and 'UNKNOWN' or 'PENDING')
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return {1, redis.call('HGET', KEYS[1], 'mq_state')}
