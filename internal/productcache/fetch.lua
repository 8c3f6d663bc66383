-- The entry and its remaining life, read in one step so that the age
-- belongs to the value read (a refresh may replace it between two commands).
-- KEYS[1]: the entry. Returns {value, pttl in ms}, or false when there is none.
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
return {v, redis.call('PTTL', KEYS[1])}
