-- Raise this server's counter to the lease's fence, only while the server
-- still holds our key: the counter must be at least the fence before anyone
-- else can set the key here.
-- KEYS[1] lock key, KEYS[2] fence hash. ARGV[1] token, ARGV[2] fence.
-- Reply 1: the counter is now at least the fence. Reply 0: our key is gone.
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  return 0
end
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
local n = redis.call('HGET', KEYS[2], 'n')
if not n or tonumber(n) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[2], 'n', ARGV[2])
end
return 1
