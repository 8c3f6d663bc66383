-- Reserve units from a product's stock counter, at most once per reservation.
-- KEYS[1]: the counter, a hash {r = round, g = generation, n = units left}
-- (stock:{id}); KEYS[2]: this sale's reservation key; KEYS[3], only for an
-- order with an idempotency key: that key's in-flight marker. All in the same
-- hash slot. ARGV[1]: units; ARGV[2]: TTL in ms of the reservation and the
-- marker; ARGV[3]: this reservation's id.
-- Returns {status, left, round, generation}: status 1 reserved (left = units
-- left after it), 0 too few units (counter unchanged), -1 counter missing
-- (load it and run again), -2 this reservation was already given back, -3
-- another order with the same idempotency key holds a reservation in flight
-- (nothing reserved: its outcome decides this one's).
-- The reservation remembers the counter's round and generation, so that its
-- units can only ever go back to the counter they came from. A re-sent
-- script finds its reservation and returns the first answer instead of
-- decrementing twice.
local state = redis.call('GET', KEYS[2])
if state then
  if state == 'returned' then
    return {-2, 0, 0, 0}
  end
  local r, g, left = string.match(state, '^(%d+) (%d+) (%-?%d+)$')
  return {1, tonumber(left), tonumber(r), tonumber(g)}
end
if KEYS[3] then
  local twin = redis.call('GET', KEYS[3])
  if twin and twin ~= ARGV[3] then
    return {-3, 0, 0, 0}
  end
end
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return {-1, 0, 0, 0}
end
local c = redis.call('HMGET', KEYS[1], 'r', 'g', 'n')
if not c[1] or not c[2] or not c[3] then
  return {-1, 0, 0, 0}
end
local left = tonumber(c[3])
local n = tonumber(ARGV[1])
if left < n then
  return {0, left, tonumber(c[1]), tonumber(c[2])}
end
left = redis.call('HINCRBY', KEYS[1], 'n', -n)
redis.call('SET', KEYS[2], c[1] .. ' ' .. c[2] .. ' ' .. left, 'PX', ARGV[2])
if KEYS[3] then
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
end
return {1, left, tonumber(c[1]), tonumber(c[2])}
