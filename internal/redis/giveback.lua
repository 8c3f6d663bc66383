-- Give a reservation's units back to the counter they came from, at most once.
-- KEYS[1]: the counter (hash r, g, n); KEYS[2]: the reservation key; KEYS[3]:
-- the product's leases (see reserve.lua); KEYS[4], only for an order with an
-- idempotency key: that key's in-flight marker, cleared when it names this
-- reservation so that a waiting twin order can go ahead. ARGV[1]: units;
-- ARGV[2]: reservation TTL in ms; ARGV[3]: reservation id.
-- Returns the units given back.
-- The reservation is marked returned even when it is missing, so a reserve
-- that arrives late (a reply lost, then this) cannot take the units after all.
-- Units go back only while the reservation's lease is in the leases set (a
-- lease that ran out was given back by the reaper already) and only to the
-- same round and generation of the counter: a counter reloaded from Postgres
-- (after a loss or a restock) already counts them, and another round's stock
-- is none of this sale's business.
local state = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], 'returned', 'PX', ARGV[2])
if not state or state == 'returned' then
  return 0
end
local r, g = string.match(state, '^(%d+) (%d+) ')
local member = ARGV[3] .. ' ' .. r .. ' ' .. g .. ' ' .. ARGV[1]
if KEYS[4] and redis.call('GET', KEYS[4]) == member then
  redis.call('DEL', KEYS[4])
end
if redis.call('ZREM', KEYS[3], member) == 0 then
  return 0
end
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return 0
end
local c = redis.call('HMGET', KEYS[1], 'r', 'g')
if c[1] ~= r or c[2] ~= g then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'n', ARGV[1])
return tonumber(ARGV[1])
