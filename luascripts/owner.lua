-- owner: a fragment, not a script: prepended to the scripts that ask who
-- holds a lock. A name may be taken by a lock of another kind, whose key
-- has another type: these ask with one command, not a TYPE first, and take
-- the WRONGTYPE error for "not held by owner".

-- Returns the owner id a plain lock (a string key) holds, or nil.
local function holder(key)
  local v = redis_pcall('get', key)
  if type(v) == 'string' then
    return v
  end
  return nil
end

-- Reports whether the lock at key, a hash of owner ids (reentrant, fair,
-- read-write), counts owner among its holders.
local function holds(key, owner)
  return redis_pcall('hexists', key, owner) == 1
end

-- Ends depth of owner's holds of the hash lock key (depth n > 1 leaves
-- n - 1; 1, or 0, ends them all), owner's field telling its hold count.
-- Returns 'kept' when holds remain, 'ended' when owner's field is gone
-- (a reentrant or fair lock's hash, whose only field it was, with it),
-- nil when owner holds nothing, or key is not a hash. Ending all holds
-- costs one HDEL.
local function end_holds(key, owner, depth)
  depth = tonumber(depth)
  if depth > 1 then
    if not holds(key, owner) then
      return nil
    end
    redis_call('hset', key, owner, depth - 1)
    return 'kept'
  end
  if redis_pcall('hdel', key, owner) == 1 then
    return 'ended'
  end
  return nil
end
