-- Start a new Reentrant hold: a hash {owner -> count} plus the hold's token,
-- fence and last operation id in fields that start with a NUL byte.
-- KEYS[1] lock hash, KEYS[2] fence hash (same hash tag).
-- ARGV[1] owner, ARGV[2] hold token, ARGV[3] TTL in ms, ARGV[4] fence floor ('' = none).
-- Reply {1, fence}: acquired (a re-sent command finds its own token and
-- returns the same fence). {0, pttl}: held by another hold. {-1}: need a floor.
-- A Mutex hold (a string) on the same key excludes us too.
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'hash' then
  return {0, redis.call('PTTL', KEYS[1])}
end
local tok = redis.call('HGET', KEYS[1], '\0tok')
if tok then
  if tok == ARGV[2] then
    return {1, tonumber(redis.call('HGET', KEYS[1], '\0fence'))}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local fence = mint_fence(KEYS[2], ARGV[4])
if not fence then
  return {-1}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], ARGV[1], 1, '\0tok', ARGV[2], '\0fence', fence, '\0op', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, tonumber(fence)}
