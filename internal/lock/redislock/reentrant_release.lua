-- Release one level of a Reentrant hold.
-- KEYS[1] lock hash, KEYS[2] fence hash. ARGV[1] owner, ARGV[2] hold token,
-- ARGV[3] operation id, ARGV[4] '1' for the holder's last release (delete the
-- hold whatever the count says), '0' for a nested one (decrement), ARGV[5] the
-- release channel, on which deleting the hold is announced to wake a waiter.
-- Reply n > 0: the owner's count left. Reply 0: released entirely (now, or by
-- an earlier send of this command: the token is the fence hash's tombstone).
-- Reply -1: not held by this hold.
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or redis.call('HGET', KEYS[1], '\0tok') ~= ARGV[2] then
  if ARGV[4] == '1' and redis.call('HGET', KEYS[2], 'rel') == ARGV[2] then
    return 0
  end
  return -1
end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 'rel', ARGV[2])
  redis.call('PUBLISH', ARGV[5], '')
  return 0
end
if redis.call('HGET', KEYS[1], '\0op') ~= ARGV[3] then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  redis.call('HSET', KEYS[1], '\0op', ARGV[3])
end
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if n < 1 then
  -- The holder still has leases out (it did not ask for the last release):
  -- keep the hold; the count is only a mirror of the holder's own count.
  return 1
end
return n
