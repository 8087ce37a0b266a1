-- semaphore: a fragment, not a script: prepended, after time.lua,
-- fence.lua, gone.lua, wake.lua and queue.lua, to the semaphore's scripts.
--
-- A semaphore is these keys under its name's hash tag:
--   the lock (a hash): "size" -> the size its permits are held under,
--     "used" -> how many are held, each holder's owner id -> "n token"
--     (its permits and its grant's fencing token), and "want:" owner id ->
--     n for each queued waiter;
--   the holders' expiries (the lock's "readers" key; a zset: owner id ->
--     server time, ms), which their watchdogs push forward;
--   the queue (queue.lua's list and deadlines), in arrival order.
-- Field names without a ':' cannot be owner ids, which are "client:seq".
-- The hash and the holders' zset go when the last permit is given back
-- with nobody queued, so that a semaphore nobody uses leaves no key but
-- its fence, and the next caller's size holds.

local size_field, used_field, want_prefix = 'size', 'used', 'want:'

-- Extends the TTL of the semaphore's hash or holders' zset to at least ms
-- milliseconds, in one command: unlike the keys extend (time.lua) takes,
-- these always have an expiry, set by the script that creates them.
local function lengthen(key, ms)
  redis.call('pexpire', key, ms, 'GT')
end

-- Returns the permits and the token (decimal strings) of a holder's field.
local function holding(v)
  return string.match(v, '^(%d+) (%d+)$')
end

-- Issues owner n permits until ms milliseconds from now, with a fencing
-- token, which it returns (a decimal string); writes the hash's other
-- fields given (field, value, …) in the same command. The caller writes
-- "used". fresh says the hash and the holders' zset had no expiry to keep:
-- a new semaphore's first grant sets theirs in one command each.
local function grant(lock, fence, holders, owner, n, ms, fresh, ...)
  -- '%.0f': Lua prints a number this large in exponent form.
  local token = string.format('%.0f', next_token(fence))
  redis.call('hset', lock, owner, n .. ' ' .. token, ...)
  redis.call('zadd', holders, server_ms() + ms, owner)
  if fresh then
    redis.call('pexpire', lock, ms)
    redis.call('pexpire', holders, ms)
  else
    lengthen(lock, ms)
    lengthen(holders, ms)
  end
  return token
end

-- Frees the permits of the holders whose expiry has passed (they died, or
-- were cut off from Redis for longer than their lease: their leases have
-- ended), and returns how many of used are still held.
local function purge(lock, holders, used)
  if used == 0 then
    return 0
  end
  local dead = redis.call('zrangebyscore', holders, '-inf', server_ms())
  if #dead == 0 then
    return used
  end
  for _, owner in ipairs(dead) do
    local v = redis.call('hget', lock, owner)
    if v then
      used = used - tonumber((holding(v)))
      redis.call('hdel', lock, owner)
    end
  end
  redis.call('zrem', holders, unpack(dead))
  return used
end

-- Hands permits to the waiters at the head of the queue, in arrival
-- order, as many as fit in size with used held: each is granted for what
-- is left of its deadline (a granted waiter that died holds its permits no
-- longer than its waiter timeout) and woken with "owner token"; except
-- self, the caller's own owner, asking for self_n, whose reply says so.
-- Purges the dead
-- waiters it meets. Stops at the first live waiter that does not fit, so
-- that no waiter is overtaken by later ones asking for fewer; one whose
-- want is unknown, or larger than size (it asked under another size), is
-- woken by name to ask again with an attempt, which says.
-- Returns the permits held now, the live waiter left first (or nil) and
-- its deadline, and self's token if self was granted. Without self, once
-- every permit is held it returns at once with no waiter (nil): nobody
-- can be served, and a caller that is not waiting needs no head.
local function serve(lock, fence, queue, waiters, holders, size, used, pub, channel, self, self_n)
  local now = server_ms()
  local mine
  local function first()
    if used >= size and not self then
      return nil
    end
    return redis.call('lindex', queue, 0)
  end
  local head = first()
  while head do
    local deadline = redis.call('zscore', waiters, head)
    deadline = deadline and tonumber(deadline)
    if deadline and deadline > now then
      if used >= size then
        -- Every permit is held: no want fits.
        return used, head, deadline, mine
      end
      local want = self_n
      if head ~= self then
        want = tonumber(redis.call('hget', lock, want_prefix .. head))
      end
      if not want or want > size then
        wake_owner(pub, channel, head)
        return used, head, deadline, mine
      end
      if used + want > size then
        return used, head, deadline, mine
      end
      redis.call('lpop', queue)
      redis.call('zrem', waiters, head)
      redis.call('hdel', lock, want_prefix .. head)
      local token = grant(lock, fence, holders, head, want, deadline - now, false)
      used = used + want
      if head == self then
        mine = token
      else
        wake_owner(pub, channel, head, head .. ' ' .. token)
      end
    else
      -- Dead: its deadline passed, or went with the deadlines' key.
      redis.call('lpop', queue)
      if deadline then
        redis.call('zrem', waiters, head)
      end
      redis.call('hdel', lock, want_prefix .. head)
    end
    head = first()
  end
  return used, nil, nil, mine
end

-- Writes how many permits are held (and the size, if not nil), or, with
-- none held and nobody queued (head is the first live waiter, or nil),
-- deletes the semaphore's hash and holders' zset: it is free, and the
-- next caller's size holds.
local function settle(lock, holders, used, head, size)
  if used == 0 and not head then
    redis.call('del', lock, holders)
  elseif size then
    redis.call('hset', lock, used_field, used, size_field, size)
  else
    redis.call('hset', lock, used_field, used)
  end
end

-- How long, in milliseconds, a waiter that was not granted may sleep:
-- until the first holder's expiry (its permits come back without a
-- wake-up if it died), and, when another waiter is first, no later than
-- that waiter's deadline (it is purged then if it died). Granted permits
-- come with a wake-up by name.
local function wait_for(holders, owner, head, deadline)
  local now = server_ms()
  local wait = -1
  local first = redis.call('zrange', holders, 0, 0, 'WITHSCORES')
  if first[2] then
    wait = math.max(tonumber(first[2]) - now, 0)
  end
  if head and head ~= owner then
    local left = math.max(deadline - now, 0)
    if wait < 0 or left < wait then
      wait = left
    end
  end
  return wait
end

-- The error a caller giving another size than the permits held gets; the
-- client reads its code (luascripts.InvalidCode) as relock.ErrInvalid.
local function size_conflict(size, stored)
  return redis.error_reply('RELOCKINVALID semaphore size ' .. size .. ' differs from the size ' .. stored .. ' its permits are held under')
end
