-- init_sku.lua: set up one SKU's Redis admission state at sale set-up.
-- Meta (the sale window) is always written; counters only when absent, so
-- re-running set-up for a live sale never resets stock.
--
-- KEYS[1] counter hash  seckill:{a:s}:counter
-- KEYS[2] meta hash     seckill:{a:s}:meta
-- ARGV[1] initial  ARGV[2] available (both from PostgreSQL)
-- ARGV[3] start_ms  ARGV[4] end_ms  ARGV[5] order_deadline_ms  ARGV[6] payment_timeout_ms
-- ARGV[7] "1" when PostgreSQL shows no stock movement yet (initial = available)
-- ARGV[8] buckets: how many stock buckets the SKU has (this call sets up one
--         of them: KEYS are that bucket's; initial and available its share)
-- ARGV[9] max_per_user: the sale's per-user cap (lua/hold.lua), read by
--         gateways with the bucket count
--
-- Returns {code, available}: 1 counters created, 0 counters kept (live SKU),
-- -1 counters missing but PostgreSQL has movements: nothing written to the
--    counters; Redis must be rebuilt from PostgreSQL (open reservations and
--    orders would otherwise be forgotten and stock oversold).
redis.call('HSET', KEYS[2], 'start_ms', ARGV[3], 'end_ms', ARGV[4],
    'order_deadline_ms', ARGV[5], 'payment_timeout_ms', ARGV[6], 'buckets', ARGV[8],
    'max_per_user', ARGV[9])
-- A counter without its 'initial' field is not a counter (an older script
-- created one with a stray total): set-up treats it as missing.
if redis.call('HEXISTS', KEYS[1], 'initial') == 1 then
    return {0, tonumber(redis.call('HGET', KEYS[1], 'available') or '0')}
end
if ARGV[7] ~= '1' then
    return {-1, 0}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'initial', ARGV[1], 'available', ARGV[2], 'open_reserved', 0, 'committed', 0)
return {1, tonumber(ARGV[2])}
