-- hold_release.lua: give back one entry of a user's holds hash
-- (docs/spec.md#user-cap): the gateway's own claim when reserve.lua did not
-- admit that reservation, or a stale entry a healer found (its reservation
-- missing past the grace, compensated or cancelled). Only the entry as the
-- caller saw it: one renewed since (the same request retried) stays. O(1).
--
-- KEYS[1] holds hash  seckill:{a:<activity>:u:<user>}:holds
-- ARGV[1] reservation_id  ARGV[2] the entry "<sku_id> <claimed_at_ms>" the caller saw
--
-- Returns 1 released, 0 not there or renewed since (nothing written).
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
