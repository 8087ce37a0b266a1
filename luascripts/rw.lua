-- rw: a fragment, not a script: prepended to the read-write lock's scripts,
-- after time.lua.
--
-- A read-write lock is a hash: field "mode" is "read" or "write", and each
-- holder's owner id maps to its hold count. Each reader also has a deadline
-- on the server clock in the readers zset, so that a dead reader's hold ends
-- at its own deadline while live readers keep renewing theirs. The hash's
-- TTL is the latest deadline of any holder.
--
-- The lock is phase-fair. A reader that a writer keeps out (one holding
-- the lock, or one waiting for it) is recorded as waiting: in the readers
-- zset, with a deadline of a waiter timeout, but not in the hash. A
-- writer's release lets every reader waiting then in (admit_readers)
-- before the next writer, who waits for them; readers that come later wait
-- for that writer.

-- Returns the state of the lock at key: its mode, "read" or "write", when
-- a read-write lock holds it, "free" when nothing does, and "foreign" when
-- a plain mutex (a string key) holds the name. A hash without a mode is
-- "write": one exclusive holder, which is a writer a release handed the
-- lock to (hand_on grants the same hash whatever the kind, see rw_release)
-- or a reentrant or fair lock; the read-write lock treats each alike, and
-- its waiting writers queue behind it (queue.lua). One HGET for a read-write lock; for
-- the others, a PTTL too, whose reply comes second (-2 when free; nil when
-- the key is not a hash, not asked).
local function lock_state(key)
  local mode = redis_pcall('hget', key, 'mode')
  if type(mode) == 'string' then
    return mode
  end
  if type(mode) == 'table' then
    return 'foreign' -- WRONGTYPE: a string key, a plain mutex
  end
  local pttl = redis_call('pttl', key)
  if pttl == -2 then
    return 'free', pttl
  end
  return 'write', pttl
end

-- Ends the holds of the readers of the read-locked lock whose deadline has
-- passed; deletes the lock when no holder is left, and reports whether it
-- did. O(log n + expired).
local function purge_readers(lock, readers, now)
  local ended = false
  for _, dead in ipairs(redis_call('zrangebyscore', readers, '-inf', now)) do
    redis_call('zrem', readers, dead)
    redis_call('hdel', lock, dead)
    ended = true
  end
  -- Only a hold ended here can leave the hash with its mode alone: every
  -- script that ends one deletes the lock when none is left.
  if ended and redis_call('hlen', lock) == 1 then
    redis_call('del', lock)
    return true
  end
  return false
end

-- The third element of an acquire reply that recorded its reader as
-- waiting (wait_as_reader): not in the queue, and dated (luascripts.Recorded).
local recorded = 2

-- Records owner, a reader kept out by a writer, as waiting (see above) for
-- ms milliseconds, and returns how long it may sleep: wait, but no longer
-- than half of ms, so that its next attempt renews the record before it
-- lapses.
local function wait_as_reader(readers, owner, ms, wait)
  ms = tonumber(ms)
  redis_call('zadd', readers, server_ms() + ms, owner)
  extend(readers, ms)
  local renew = math.floor(ms / 2)
  if wait < 0 or wait > renew then
    return renew
  end
  return wait
end

-- Lets the readers waiting for a writer's release in, at its release:
-- each becomes a holder of the lock, read-locked now, until its deadline
-- as a waiter (a granted reader that died holds it no longer). Holders
-- (the writer's chain's readers) keep their counts. Each reader let in is
-- handed its hold as hand_on hands a writer the lock (queue.lua): a token
-- of its own from the fence (fence.lua, next_tokens) and a wake-up "owner
-- token" on its client's channel (wake.lua), on which it holds the lock
-- with no attempt; one that misses it, or does not trust it, takes its
-- hold up by its next attempt (rw_read_acquire). Nobody else is woken:
-- the lock is read-locked, so only readers could enter, and every reader
-- kept out waits recorded here. fresh says the caller has just deleted
-- the lock (a writer's last release): there is no expiry to keep. Reports
-- whether any reader was waiting. Only rw_release calls it, after
-- fence.lua and wake.lua.
local function admit_readers(lock, readers, fence, pub, channel, fresh)
  local now = server_ms()
  local waiting = redis_call('zrangebyscore', readers, '(' .. now, '+inf', 'WITHSCORES')
  if not waiting[1] then
    return false
  end
  redis_call('hset', lock, 'mode', 'read')
  local admitted = {}
  for i = 1, #waiting, 2 do
    if redis_call('hsetnx', lock, waiting[i], 1) == 1 then
      admitted[#admitted + 1] = waiting[i]
    end
  end
  -- Ascending scores: the last is the latest deadline.
  if fresh then
    redis_call('pexpire', lock, string_format('%d', tonumber(waiting[#waiting]) - now))
  else
    extend(lock, tonumber(waiting[#waiting]) - now)
  end
  if admitted[1] then
    local token = next_tokens(fence, #admitted)
    for i, owner in ipairs(admitted) do
      wake_owner(pub, channel, owner, owner .. ' ' .. string_format('%d', token + i - 1))
    end
  end
  return true
end
