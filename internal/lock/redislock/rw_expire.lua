-- The start of every read-write lock script: drop the readers and the
-- waiting writers whose leases ran out (their holders died or were cut off).
-- KEYS[3] readers (zset token → expiry, ms on Redis's clock), KEYS[4]
-- waiting writers (zset token → expiry). Sets now (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
