-- Give a reservation's units back to the product's stock counter, at most once.
-- KEYS[1]: the counter; KEYS[2]: the reservation key; KEYS[3], only for an
-- order with an idempotency key: that key's in-flight marker, cleared when it
-- names this reservation so that a waiting twin order can go ahead.
-- ARGV[1]: units; ARGV[2]: reservation TTL in ms; ARGV[3]: reservation id.
-- Returns the units given back.
-- The reservation is marked returned even when it is missing, so a reserve
-- that arrives late (a reply lost, then this) cannot take the units after all.
-- A missing counter is left missing: it will be reloaded from Postgres, where
-- this sale did not commit.
if KEYS[3] and redis.call('GET', KEYS[3]) == ARGV[3] then
  redis.call('DEL', KEYS[3])
end
local state = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[2], 'returned', 'PX', ARGV[2])
if not state or state == 'returned' then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], ARGV[1])
return tonumber(ARGV[1])
