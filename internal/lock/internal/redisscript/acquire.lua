-- Acquire on one server: SET key NX PX with a fencing token minted from this
-- server's counter in the same step.
-- KEYS[1] lock key, KEYS[2] fence hash (same hash tag).
-- ARGV[1] token (fixed length), ARGV[2] TTL in ms, ARGV[3] fence floor ('' = none given).
-- Reply {1, fence}: set. A re-sent command (go-redis retries after a lost
-- reply) finds its own token and returns the fence it already minted.
-- Reply {0, pttl}: held by someone else (any value, e.g. redsync's, or a
-- hash: a redislock Reentrant hold excludes us too).
-- Reply {-1}: the counter is missing (first use, or this server lost its data)
-- and no floor was given: ask the caller for one and run again.
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'string' then
  return {0, redis.call('PTTL', KEYS[1])}
end
local v = redis.call('GET', KEYS[1])
if v then
  if string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    return {1, tonumber(string.sub(v, #ARGV[1] + 2))}
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
return set_fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
