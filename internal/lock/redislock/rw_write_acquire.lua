-- Take the write side of a read-write lock: the lock key, as a Mutex takes
-- it (so a Mutex and a writer exclude each other), once no reader holds.
-- KEYS[1] lock key, KEYS[2] fence hash, KEYS[3] readers, KEYS[4] waiting
-- writers. ARGV[1] token, ARGV[2] TTL in ms, ARGV[3] fence floor ('' = none).
-- Reply {1, fence}: held (a re-sent command finds its own token). Reply
-- {0, ms}: held by another writer, or readers hold it: this writer is now
-- waiting (in KEYS[4] for a lease's time, renewed at every try), which keeps
-- new readers out; ms is how long the lease in the way runs. Reply {-1}: no
-- fencing counter and no floor given.
local ty = redis.call('TYPE', KEYS[1]).ok
local v = false
if ty == 'string' then
  v = redis.call('GET', KEYS[1])
  if string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    return {1, tonumber(string.sub(v, #ARGV[1] + 2))}
  end
end
if ty ~= 'none' then
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
  return {0, math.max(redis.call('PTTL', KEYS[1]), 1)}
end
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
  return {0, math.max(tonumber(last[2]) - now, 1)}
end
local r = set_fenced(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if r[1] == 1 then
  redis.call('ZREM', KEYS[4], ARGV[1])
end
return r
