-- Re-enter a Reentrant hold: increment the owner's count and refresh the TTL.
-- KEYS[1] lock hash. ARGV[1] owner, ARGV[2] hold token, ARGV[3] TTL in ms,
-- ARGV[4] operation id (unique within the hold; a re-sent command with the
-- same id does not increment twice).
-- Reply n > 0: the owner's count now. Reply 0: the hold is gone (lost).
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or redis.call('HGET', KEYS[1], '\0tok') ~= ARGV[2] then
  return 0
end
if redis.call('HGET', KEYS[1], '\0op') ~= ARGV[4] then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('HSET', KEYS[1], '\0op', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
