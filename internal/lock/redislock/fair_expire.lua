-- The start of both Fair scripts (fair_acquire.lua, fair_release.lua): now,
-- in ms on this server's clock, and the waiters whose lease ran out (their
-- process died or stopped) dropped from the queue.
-- KEYS as in fair_acquire.lua.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], w)
  redis.call('ZREM', KEYS[3], w)
end
