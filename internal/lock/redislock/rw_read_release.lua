-- Leave the read side, waking waiters when the last reader leaves.
-- KEYS[1..4] as in rw_read_acquire.lua. ARGV[1] token, ARGV[2] release channel.
-- Reply 1: released (now or by an earlier send, remembered in the fence
-- hash's 'rrel'). Reply 0: not a reader (its lease had run out).
if redis.call('ZREM', KEYS[3], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[2], 'rrel', ARGV[1])
  if redis.call('ZCARD', KEYS[3]) == 0 then
    redis.call('PUBLISH', ARGV[2], '')
  end
  return 1
end
if redis.call('HGET', KEYS[2], 'rrel') == ARGV[1] then
  return 1
end
return 0
