-- Drops an entry after a restock's commit and raises the round floor to the
-- restock's round, so that no entry of an older round is written after it
-- (store.lua). KEYS[1]: the entry; KEYS[2]: the round floor.
-- ARGV[1]: the restock's round; ARGV[2]: the floor's life in ms. Safe to
-- re-send.
redis.call('DEL', KEYS[1])
local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('SET', KEYS[2], tostring(math.max(floor, tonumber(ARGV[1]))), 'PX', ARGV[2])
return 1
