-- Writes an entry unless its round is older than the newest round a restock
-- dropped (drop.lua): a refresh that read Postgres before the restock's
-- commit and writes after its drop would otherwise bring the old round back.
-- KEYS[1]: the entry; KEYS[2]: the round floor.
-- ARGV[1]: the value; ARGV[2]: its life in ms; ARGV[3]: its round (0: a
-- product that does not exist). Returns 1 when written, else 0. Safe to
-- re-send.
local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[3]) < floor then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
