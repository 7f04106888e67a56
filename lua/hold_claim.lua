-- hold_claim.lua: claim one of a user's max_per_user holds in a sale, before
-- reserve.lua runs for it (docs/spec.md#user-cap). The holds hash has its own
-- slot, {a:<activity>:u:<user>}: a user's reservations of several SKUs live
-- in several SKU slots, so no SKU script can count them. O(cap).
--
-- KEYS[1] holds hash  seckill:{a:<activity>:u:<user>}:holds
--         reservation_id -> "<sku_id> <claimed_at_ms>"
-- ARGV[1] reservation_id  ARGV[2] sku_id  ARGV[3] now_ms  ARGV[4] cap (max_per_user)
-- ARGV[5] ttl_ms (garbage collection only: the reservations' TTL)
--
-- Returns {1} claimed: a new entry, or the same reservation_id again (its
-- claimed_at renewed, so a healer that read the old entry cannot delete it),
-- or {-1, rid1, entry1, rid2, entry2, ...}: the cap is reached, with the
-- entries held (nothing written).
-- Under the cap (the usual case) a claim is HLEN, HSET, PEXPIRE; HEXISTS only
-- at the cap, where a renewal of a held entry still passes.
if redis.call('HLEN', KEYS[1]) < tonumber(ARGV[4]) or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
    return {1}
end
local out = {-1}
local held = redis.call('HGETALL', KEYS[1])
for i = 1, #held do
    out[i + 1] = held[i]
end
return out
