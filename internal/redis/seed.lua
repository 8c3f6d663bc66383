-- Load a product's stock counter from Postgres's quantity and round, unless
-- it already holds that round or a newer one (another sale loaded it
-- meanwhile, or a restock overtook this load).
-- KEYS[1]: the counter (hash r, g, n); KEYS[2]: the product's generation
-- counter. ARGV[1]: units; ARGV[2]: round; ARGV[3]: counter TTL in ms.
-- Each load gets a new generation, so reservations taken from an earlier
-- load never give their units back to this one (the load counted them).
-- Returns 1 loaded, 0 kept.
if redis.call('TYPE', KEYS[1]).ok == 'hash' then
  local r = tonumber(redis.call('HGET', KEYS[1], 'r'))
  if r and r >= tonumber(ARGV[2]) and redis.call('HEXISTS', KEYS[1], 'n') == 1 then
    return 0
  end
end
local g = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'r', ARGV[2], 'g', g, 'n', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
