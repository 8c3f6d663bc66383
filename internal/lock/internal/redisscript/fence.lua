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
-- set_fenced(key, hash, token, ttl, floor) takes key for token (SET key
-- "token:fence" PX ttl) with a fence minted from hash: the acquire reply
-- {1, fence}, or {-1} when the counter is missing and no floor was given.
local function set_fenced(key, hash, token, ttl, floor)
  local fence = mint_fence(hash, floor)
  if not fence then
    return {-1}
  end
  redis.call('SET', key, token .. ':' .. fence, 'PX', ttl)
  return {1, tonumber(fence)}
end
