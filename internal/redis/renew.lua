-- Renew a reservation's lease while its sale runs.
-- KEYS[1]: the product's leases (see reserve.lua). ARGV[1]: the lease member;
-- ARGV[2]: the lease in ms.
-- Returns 1 renewed, 0 gone (settled, given back, or reaped after it ran out).
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1
