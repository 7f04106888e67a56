-- send_done.lua: record the outcome of one send of ORDER_CREATE_REQUESTED for
-- one or more reservations of one SKU (a gateway batch, or one scanner send)
-- and say when each is looked at next. It never gives up: a reservation stays
-- in send_due for as long as its Redis state is RESERVED (order_created.lua
-- and compensate.lua take it out when it settles), so a broker outage of any
-- length delays a request but never loses it; past its business deadline
-- reconciliation rejects it durably and gives the unit back. O(N) in the
-- reservations of the call (the gateway sends at most its batch size, 64).
--
-- KEYS[1] send_due zset     seckill:{a:s}:send_due
-- KEYS[2] counter hash      seckill:{a:s}:counter
-- KEYS[2+i] reservation hash of the i-th reservation  seckill:{a:s}:r:<reservation_id>
-- ARGV[1] outcome: PUBLISHED | UNKNOWN | FAILED (the same for every reservation of the call)
-- ARGV[2] next_due_ms  UNKNOWN/FAILED: when to send again (the caller's capped backoff)
-- ARGV[3] error text (may be empty)
-- ARGV[2+2i] reservation_id of the i-th reservation
-- ARGV[3+2i] recheck_ms of the i-th: PUBLISHED: when to look again should it still be unsettled
--
-- Returns {code_1, mq_state_1, code_2, mq_state_2, ...}, per reservation:
--   1 recorded; mq_state after it (PUBLISHED, UNKNOWN or PENDING)
--   3 SETTLED  the reservation already left RESERVED: removed from send_due
--  -1 MISSING  the hash is gone: removed from send_due and counted in the
--              counter's send_missing_total if the counter exists
--              (reconciliation owns it; no script but set-up and rebuild
--              creates a counter)
local outcome, next_due, err_text = ARGV[1], ARGV[2], ARGV[3]
local out = {}
for i = 3, #KEYS do
    local rid, recheck = ARGV[2 * i - 2], ARGV[2 * i - 1]
    local key = KEYS[i]
    local code, state
    -- One read: a reservation hash always has a status, so none means the hash is gone.
    local cur = redis.call('HMGET', key, 'status', 'mq_state', 'send_attempts')
    if not cur[1] then
        redis.call('ZREM', KEYS[1], rid)
        if redis.call('EXISTS', KEYS[2]) == 1 then
            redis.call('HINCRBY', KEYS[2], 'send_missing_total', 1)
        end
        code, state = -1, 'MISSING'
    elseif cur[1] ~= 'RESERVED' then
        redis.call('ZREM', KEYS[1], rid)
        code, state = 3, 'SETTLED'
    else
        -- One write per reservation: the attempt count rides with the outcome.
        local attempts = (tonumber(cur[3]) or 0) + 1
        code = 1
        if outcome == 'PUBLISHED' then
            redis.call('HSET', key, 'mq_state', 'PUBLISHED', 'last_error', '', 'send_attempts', attempts)
            redis.call('ZADD', KEYS[1], 'XX', recheck, rid)
            state = 'PUBLISHED'
        elseif cur[2] == 'PUBLISHED' then
            -- A late failure (another sender's batch, a timed-out retry)
            -- never re-queues a message the broker already accepted.
            redis.call('HSET', key, 'last_error', err_text, 'send_attempts', attempts)
            state = 'PUBLISHED'
        else
            -- UNKNOWN is not failure (docs/spec.md#unknown-is-not-failure) and stays UNKNOWN:
            -- the message may be on the broker; re-sending it with the
            -- same message_id is harmless.
            state = 'PENDING'
            if outcome == 'UNKNOWN' or cur[2] == 'UNKNOWN' then
                state = 'UNKNOWN'
            end
            redis.call('HSET', key, 'mq_state', state, 'last_error', err_text, 'send_attempts', attempts)
            redis.call('ZADD', KEYS[1], 'XX', next_due, rid)
        end
    end
    out[#out + 1] = code
    out[#out + 1] = state
end
return out
