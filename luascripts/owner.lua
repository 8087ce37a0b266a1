-- owner: a fragment, not a script: prepended to the scripts that ask who
-- holds a lock. A name may be taken by a lock of another kind, whose key
-- has another type: these ask with one command, not a TYPE first, and take
-- the WRONGTYPE error for "not held by owner".

-- Returns the owner id a plain lock (a string key) holds, or nil.
local function holder(key)
  local v = redis.pcall('get', key)
  if type(v) == 'string' then
    return v
  end
  return nil
end

-- Reports whether the lock at key, a hash of owner ids (reentrant, fair,
-- read-write), counts owner among its holders.
local function holds(key, owner)
  return redis.pcall('hexists', key, owner) == 1
end
