-- Release a Fair lock, or leave its queue (a waiter giving up, or cleaning
-- up after a try whose reply was lost): remove our queue entry, delete the
-- holder key if it carries our token (leaving the token as a tombstone in
-- the fence hash, so that a re-sent release still reports "released"), and
-- when the lock is free, wake the head of the queue: the notice on the wake
-- channel names it.
-- KEYS as in fair_acquire.lua. ARGV[1] token, ARGV[2] wake channel.
-- Reply 1: we held it and it is released (now or by an earlier send of this
-- command). Reply 0: we did not hold it.
-- Runs after fair_expire.lua (expired waiters dropped).
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local released = 0
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[4], 'rel', ARGV[1])
  released = 1
  v = false
elseif redis.call('HGET', KEYS[4], 'rel') == ARGV[1] then
  released = 1
end
if not v then
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if head then
    redis.call('PUBLISH', ARGV[2], head)
  end
end
return released
