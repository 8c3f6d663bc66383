-- Reserve units from a product's stock counter, at most once per reservation.
-- KEYS[1]: the counter (stock:{id}); KEYS[2]: this sale's reservation key;
-- KEYS[3], only for an order with an idempotency key: that key's in-flight
-- marker. All in the same hash slot. ARGV[1]: units; ARGV[2]: TTL in ms of
-- the reservation and the marker; ARGV[3]: this reservation's id.
-- Returns {status, left}: status 1 reserved (left = units left after it),
-- 0 too few units (counter unchanged), -1 counter missing (nothing created:
-- DECRBY on a missing key would create it negative), -2 this reservation was
-- already given back, -3 another order with the same idempotency key holds a
-- reservation in flight (nothing reserved: its outcome decides this one's).
-- A re-sent script finds its reservation and returns the first answer
-- instead of decrementing twice.
local state = redis.call('GET', KEYS[2])
if state then
  if state == 'returned' then
    return {-2, 0}
  end
  return {1, tonumber(state)}
end
if KEYS[3] then
  local twin = redis.call('GET', KEYS[3])
  if twin and twin ~= ARGV[3] then
    return {-3, 0}
  end
end
local left = redis.call('GET', KEYS[1])
if not left then
  return {-1, 0}
end
left = tonumber(left)
local n = tonumber(ARGV[1])
if left < n then
  return {0, left}
end
left = redis.call('DECRBY', KEYS[1], n)
redis.call('SET', KEYS[2], left, 'PX', ARGV[2])
if KEYS[3] then
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
end
return {1, left}
