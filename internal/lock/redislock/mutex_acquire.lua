-- Acquire a Mutex: SET NX PX with a fencing token minted in the same step.
-- KEYS[1] lock key, KEYS[2] fence hash (same hash tag).
-- ARGV[1] token (fixed length), ARGV[2] TTL in ms, ARGV[3] fence floor ('' = none given).
-- Reply {1, fence}: acquired. A re-sent command (go-redis retries after a lost
-- reply) finds its own token and returns the fence it already minted.
-- Reply {0, pttl}: held by someone else. Reply {-1}: the fencing counter is
-- missing and no floor was given: ask the caller for one and run again.
-- A Reentrant hold (a hash) on the same key excludes us too.
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'string' then
  return {0, redis.call('PTTL', KEYS[1])}
end
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[1]) == ARGV[1] then
    return {1, tonumber(string.sub(v, #ARGV[1] + 2))}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local n = redis.call('HGET', KEYS[2], 'n')
if ARGV[3] ~= '' then
  if not n or tonumber(n) < tonumber(ARGV[3]) then
    redis.call('HSET', KEYS[2], 'n', ARGV[3])
  end
elseif not n then
  return {-1}
end
local fence = string.format('%d', redis.call('HINCRBY', KEYS[2], 'n', 1))
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'PX', ARGV[2])
return {1, tonumber(fence)}
