-- Acquire a Fair lock, or take (keep) a place in its queue.
-- KEYS[1] holder (string "<token>:<fence>", PX TTL), KEYS[2] queue (zset
-- token → ticket), KEYS[3] waiter leases (zset token → expiry in ms on this
-- server's clock), KEYS[4] fence hash {n: last fence, t: last ticket, rel:
-- last released token}; all in one hash slot.
-- ARGV[1] token (fixed length), ARGV[2] holder TTL in ms, ARGV[3] fence floor
-- ('' = none given), ARGV[4] waiter lease in ms ('' = TryLock: never queue),
-- ARGV[5] wake channel.
-- Reply {1, fence}: acquired (or, re-sent after a lost reply, acquired by the
-- first send). Reply {0, pttl, rank}: not our turn; pttl is the holder's
-- (-2: free, but the head of the queue goes first), rank our place in the
-- queue (0 = next; -1 for TryLock, which does not queue). Reply {-1}: it is
-- our turn but the fencing counter is missing and no floor was given: ask
-- the caller for one and run again.
-- Runs after fair_expire.lua (now; expired waiters dropped) and
-- redisscript's mint_fence.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return {1, tonumber(string.sub(v, #ARGV[1] + 2))}
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
if not v and (not head or head == ARGV[1]) then
  local fence = mint_fence(KEYS[4], ARGV[3])
  if not fence then
    return {-1}
  end
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'PX', ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return {1, tonumber(fence)}
end
if not v then
  -- Free, and the head's turn: remind it, in case its notice was lost or
  -- it has only now become the head (the one before it was dropped).
  redis.call('PUBLISH', ARGV[5], head)
end
local pttl = redis.call('PTTL', KEYS[1])
if ARGV[4] == '' then
  return {0, pttl, -1}
end
local lease = tonumber(ARGV[4])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], redis.call('HINCRBY', KEYS[4], 't', 1), ARGV[1])
end
redis.call('ZADD', KEYS[3], now + lease, ARGV[1])
-- The queue vanishes by itself once no live waiter refreshes it.
for i = 2, 3 do
  if redis.call('PTTL', KEYS[i]) < lease then
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return {0, pttl, redis.call('ZRANK', KEYS[2], ARGV[1])}
