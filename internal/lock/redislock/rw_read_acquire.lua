-- Take the read side of a read-write lock.
-- KEYS[1] the lock key (a writer's "token:fence", as a Mutex holds it),
-- KEYS[2] fence hash, KEYS[3] readers, KEYS[4] waiting writers.
-- ARGV[1] token, ARGV[2] TTL in ms.
-- Reply {1, fence}: held, fence being the newest writer's token (0: none
-- yet): what this reader reads is at least that writer's work. A re-sent
-- command finds its own entry. Reply {0, ms}: a writer holds the lock or
-- waits for it (writers are not starved: no new reader enters while one
-- waits); ms is how long the holder's or the first waiter's lease runs.
local mine = redis.call('ZSCORE', KEYS[3], ARGV[1])
if mine then
  return {1, tonumber(redis.call('HGET', KEYS[2], 'n') or '0')}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, math.max(redis.call('PTTL', KEYS[1]), 1)}
end
local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if first[2] then
  return {0, math.max(tonumber(first[2]) - now, 1)}
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[2], 'GT')
if redis.call('PTTL', KEYS[3]) < 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return {1, tonumber(redis.call('HGET', KEYS[2], 'n') or '0')}
