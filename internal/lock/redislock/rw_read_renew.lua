-- Renew a reader's lease while it is still a reader.
-- KEYS[1..4] as in rw_read_acquire.lua. ARGV[1] token, ARGV[2] TTL in ms.
-- Reply 1: renewed. Reply 0: not a reader any more (its lease ran out).
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[3], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[2], 'GT')
return 1
