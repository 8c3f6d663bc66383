-- Reserve units from a product's stock counter, at most once per reservation.
-- KEYS[1]: the counter, a hash {r = round, g = generation, n = units left}
-- (stock:{id}); KEYS[2]: this sale's reservation key; KEYS[3]: the product's
-- leases, a sorted set of the reservations in flight ("<id> <round>
-- <generation> <units>") scored by when their lease runs out (ms, Redis's
-- clock); KEYS[4], only for an order with an idempotency key: that key's
-- in-flight marker (the lease member of the reservation that holds the key).
-- All in the same hash slot. ARGV[1]: units; ARGV[2]: TTL in ms of the
-- reservation and the marker; ARGV[3]: this reservation's id; ARGV[4]: the
-- lease in ms.
-- Returns {status, left, round, generation[, pending]}: status 1 reserved
-- (left = units left after it), 0 too few units (counter unchanged; pending
-- = the units live reservations of this counter hold, which may yet come
-- back), -1 counter missing
-- (load it and run again), -2 this reservation was already given back, -3
-- another order with the same idempotency key holds a live reservation
-- (nothing reserved: its outcome decides this one's).
-- The reservation remembers the counter's round and generation, so that its
-- units can only ever go back to the counter they came from. A re-sent
-- script finds its reservation and returns the first answer instead of
-- decrementing twice. Leases that ran out (their holder died, or stopped
-- renewing after an unknown outcome) are reaped first: their units go back
-- to the counter they came from, so a dead buyer strands nothing for longer
-- than its lease.
local state = redis.call('GET', KEYS[2])
if state then
  if state == 'returned' then
    return {-2, 0, 0, 0}
  end
  local r, g, left = string.match(state, '^(%d+) (%d+) (%-?%d+)$')
  return {1, tonumber(left), tonumber(r), tonumber(g)}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hash = redis.call('TYPE', KEYS[1]).ok == 'hash'
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
if #expired > 0 then
  local c = hash and redis.call('HMGET', KEYS[1], 'r', 'g') or {}
  for _, m in ipairs(expired) do
    redis.call('ZREM', KEYS[3], m)
    local r, g, u = string.match(m, '^%S+ (%d+) (%d+) (%d+)$')
    if hash and r == c[1] and g == c[2] then
      redis.call('HINCRBY', KEYS[1], 'n', u)
    end
  end
end
if KEYS[4] then
  local twin = redis.call('GET', KEYS[4])
  if twin and redis.call('ZSCORE', KEYS[3], twin) then
    return {-3, 0, 0, 0}
  end
end
if not hash then
  return {-1, 0, 0, 0}
end
local c = redis.call('HMGET', KEYS[1], 'r', 'g', 'n')
if not c[1] or not c[2] or not c[3] then
  return {-1, 0, 0, 0}
end
local left = tonumber(c[3])
local n = tonumber(ARGV[1])
if left < n then
  local pending = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf')) do
    local r, g, u = string.match(m, '^%S+ (%d+) (%d+) (%d+)$')
    if r == c[1] and g == c[2] then
      pending = pending + tonumber(u)
    end
  end
  return {0, left, tonumber(c[1]), tonumber(c[2]), pending}
end
left = redis.call('HINCRBY', KEYS[1], 'n', -n)
redis.call('SET', KEYS[2], c[1] .. ' ' .. c[2] .. ' ' .. left, 'PX', ARGV[2])
local member = ARGV[3] .. ' ' .. c[1] .. ' ' .. c[2] .. ' ' .. ARGV[1]
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), member)
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if KEYS[4] then
  redis.call('SET', KEYS[4], member, 'PX', ARGV[2])
end
return {1, left, tonumber(c[1]), tonumber(c[2])}
