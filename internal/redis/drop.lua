-- Drop a product's stock counter if it is still the given round and
-- generation, so that the next sale reloads it from Postgres.
-- KEYS[1]: the counter (hash r, g, n). ARGV[1]: round; ARGV[2]: generation.
-- Returns 1 dropped, 0 kept (already reloaded, or another round's).
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return 0
end
local c = redis.call('HMGET', KEYS[1], 'r', 'g')
if c[1] == ARGV[1] and c[2] == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
