-- Renew a Reentrant hold: extend the TTL only while the hash carries our token.
-- KEYS[1] lock hash. ARGV[1] hold token, ARGV[2] TTL in ms.
-- Reply 1: renewed. Reply 0: not ours any more (terminal: never re-acquire).
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HGET', KEYS[1], '\0tok') == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
