-- A writer that gave up waiting leaves the waiting writers, so readers are
-- not kept out for the rest of its lease, and wakes them.
-- KEYS[1..4] as in rw_write_acquire.lua. ARGV[1] token, ARGV[2] release channel.
if redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
