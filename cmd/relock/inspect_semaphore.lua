-- inspect_semaphore: a fragment, not a script: prepended to inspect.lua,
-- which calls semaphore_of on the lock. Reads a semaphore's hash (see
-- luascripts/semaphore.lua: "size", "used", "keep", "due", owner id ->
-- "permits token expiry") without changing anything; what its waiters
-- want is in their queue records (luascripts/queue.lua).

-- Returns false when lock is not a semaphore (not a hash with a "size"
-- field); else {size, used, holders, held}: holders counts the holder
-- fields; held is flat owner, "permits token", expiry (server time, ms,
-- or false when the field records none) triples, cut at limit owners.
-- Fields without a ':' are the semaphore's own: owner ids hold one.
local function semaphore_of(lock, limit)
  if redis.call('type', lock).ok ~= 'hash' then
    return false
  end
  local v = redis.call('hmget', lock, 'size', 'used')
  if not v[1] then
    return false
  end
  local held, nheld = {}, 0
  local all = redis.call('hgetall', lock)
  for i = 1, #all, 2 do
    local field, value = all[i], all[i + 1]
    if string.find(field, ':', 1, true) then
      nheld = nheld + 1
      if nheld <= limit then
        local permits, token, expiry = string.match(value, '^(%S+) (%S+) ?(%d*)$')
        held[#held + 1] = field
        held[#held + 1] = permits and (permits .. ' ' .. token) or value
        held[#held + 1] = (expiry and expiry ~= '') and expiry or false
      end
    end
  end
  return {v[1], v[2] or '0', nheld, held}
end
