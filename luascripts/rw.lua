-- rw: a fragment, not a script: prepended to the read-write lock's scripts,
-- after time.lua.
--
-- A read-write lock is a hash: field "mode" is "read" or "write", and each
-- holder's owner id maps to its hold count. Each reader also has a deadline
-- on the server clock in the readers zset, so that a dead reader's hold ends
-- at its own deadline while live readers keep renewing theirs. The hash's
-- TTL is the latest deadline of any holder.

-- Reports whether a lock of another kind (not a read-write hash) holds the
-- name: the kinds share the lock key and exclude each other.
local function foreign(lock)
  local kind = redis.call('type', lock).ok
  return kind ~= 'none' and (kind ~= 'hash' or redis.call('hexists', lock, 'mode') == 0)
end

-- Purges the waiting writers that stopped heart-beating (their deadline
-- passed) from the writers' queue (see queue.lua).
local function purge_writers(waiters, queue)
  for _, dead in ipairs(redis.call('zrangebyscore', waiters, '-inf', server_ms())) do
    redis.call('zrem', waiters, dead)
    redis.call('lrem', queue, 1, dead)
  end
end

-- Returns the latest deadline of the waiting writers (server time, ms) if
-- it has not passed: a live writer waits; else nil (when it has passed,
-- they are all dead, and purged). One ZRANGE, and the clock only when a
-- writer waits.
local function writers_wait(waiters, queue)
  local last = redis.call('zrange', waiters, -1, -1, 'WITHSCORES')
  if not last[2] then
    return nil
  end
  local deadline = tonumber(last[2])
  if deadline > server_ms() then
    return deadline
  end
  purge_writers(waiters, queue)
  return nil
end

-- Ends the holds of readers whose deadline has passed, and waiting writers
-- that stopped heart-beating; deletes the lock when no holder is left.
-- O(log n + expired).
local function purge(lock, readers, waiters, queue, now)
  local ended = false
  for _, dead in ipairs(redis.call('zrangebyscore', readers, '-inf', now)) do
    redis.call('zrem', readers, dead)
    redis.call('hdel', lock, dead)
    ended = true
  end
  purge_writers(waiters, queue)
  -- Only a hold ended here can leave the hash with its mode alone: every
  -- script that ends one deletes the lock when none is left.
  if ended and redis.call('hlen', lock) == 1 and redis.call('hexists', lock, 'mode') == 1 then
    redis.call('del', lock)
  end
end
