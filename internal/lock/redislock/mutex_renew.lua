-- Renew a Mutex: extend the TTL only while the key still carries our token.
-- KEYS[1] lock key. ARGV[1] token, ARGV[2] TTL in ms.
-- Reply 1: renewed. Reply 0: not ours any more (terminal: never re-acquire).
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  return 0
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
