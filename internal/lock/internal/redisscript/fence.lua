-- mint_fence(hash, floor) is the next fencing token (a string) from the
-- counter in field n of hash, first raised to floor when one is given
-- ('' = none); nil when the counter is missing and no floor was given (a
-- new key, or the server lost its data): the caller asks for a floor.
local function mint_fence(hash, floor)
  local n = redis.call('HGET', hash, 'n')
  if floor ~= '' then
    if not n or tonumber(n) < tonumber(floor) then
      redis.call('HSET', hash, 'n', floor)
    end
  elseif not n then
    return nil
  end
  return string.format('%d', redis.call('HINCRBY', hash, 'n', 1))
end
