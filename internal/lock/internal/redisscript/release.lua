-- Release on one server: compare-and-delete, leaving the token as a
-- tombstone in the fence hash so that a re-sent release (lost reply) still
-- reports "released". Given a release channel, a release that deletes the
-- key announces it there, to wake a waiter.
-- KEYS[1] lock key, KEYS[2] fence hash. ARGV[1] token, ARGV[2] release
-- channel (optional).
-- Reply 1: released (now or by an earlier send of this command). Reply 0: not held.
local v = false
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  v = redis.call('GET', KEYS[1])
end
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 'rel', ARGV[1])
  if ARGV[2] then
    redis.call('PUBLISH', ARGV[2], '')
  end
  return 1
end
if redis.call('HGET', KEYS[2], 'rel') == ARGV[1] then
  return 1
end
return 0
