-- send_claim.lua: lease-claim due items of one SKU's send_due set
-- (docs/spec.md#send-due). Never ZPOPMIN: a claimed item stays in the set with its score pushed
-- to the lease end, so a scanner that dies after claiming loses nothing; the
-- item becomes due again when the lease runs out and another scanner takes it.
-- Bounded: at most ARGV[3] items per call.
--
-- KEYS[1] send_due zset   seckill:{a:s}:send_due
-- ARGV[1] now_ms   ARGV[2] lease_until_ms   ARGV[3] max_items
--
-- Returns a flat list {reservation_id, previous_score, ...} of claimed items.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #due, 2 do
    redis.call('ZADD', KEYS[1], 'XX', ARGV[2], due[i])
end
return due
