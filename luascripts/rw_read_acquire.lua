-- rw_read_acquire: take a read-write lock's read side for a new owner.
-- Runs after time.lua, fence.lua, gone.lua, wake.lua, queue.lua and
-- rw.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  the fence counter
-- KEYS[3]  waiting writers in arrival order (zset; see queue.lua)
-- KEYS[4]  readers' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0" not to record the owner as waiting when a writer keeps it
--          out (TryRLock); else record it (RLock)
-- ARGV[4]  waiter timeout, milliseconds: how long the record lasts
-- ARGV[5]  unused (wake-up channel)
-- ARGV[6]  unused (publish command)
-- ARGV[7]  owner id of the write hold of the caller's call chain, or ""
-- ARGV[8]  unused (first attempt)
--
-- Readers are admitted when the lock is free or read-locked and no writer
-- waits (readers cannot starve writers), when a writer's release let them
-- in (readers cannot be starved by writers either: rw.lua), or, while the
-- lock is write-locked, when the caller's own chain holds the write side
-- (downgrade). A reader kept out by a writer is recorded as waiting
-- (rw.lua, wait_as_reader), unless it is recorded as gone.
--
-- A reader does not purge dead readers: they keep no reader out. Writer
-- attempts purge them (rw.lua, purge_readers).
--
-- Returns {1, token} when acquired, {0, wait} when not: when writers wait,
-- the first one's remaining deadline, else the lock's pttl. For a reader
-- recorded as waiting, {0, wait, 2, now}: wait no more than half its
-- waiter timeout, 2 for recorded outside the queue, and now the server's
-- clock in ms, by which the reader dates the hand-over of its hold that a
-- writer's release may send it (rw.lua, admit_readers).
-- Returns {0, -1} for an owner recorded as gone, and takes nothing: its
-- caller gave up before this attempt landed. (An attempt that is refused
-- changes nothing, gone or not: only one that would be admitted asks.)
-- Returns the deadline of the first live waiting writer (server time, ms),
-- or nil when none waits; the dead ones before it are purged (queue.lua,
-- queue_head).
local function writers_wait(queue)
  local head = queue_head(queue)
  return head and head.deadline
end

local state, pttl = lock_state(KEYS[1])
if state == 'foreign' then
  return {0, pttl or redis_call('pttl', KEYS[1])}
end

-- others: how many of the waiting writers' and the gone owners' keys
-- there are. Neither, the common case, costs one EXISTS for both
-- questions: does a live writer wait, and is this owner gone.
local admit, writers, others
if state == 'write' then
  admit = ARGV[7] ~= '' and redis_call('hexists', KEYS[1], ARGV[7]) == 1
else
  others = redis_call('exists', KEYS[3], KEYS[5])
  if others > 0 then
    writers = writers_wait(KEYS[3])
  end
  admit = not writers
end
if writers and state == 'read' and ARGV[3] ~= '0' and redis_call('hexists', KEYS[1], ARGV[1]) == 1 then
  -- A writer's release let this reader, waiting, in (rw.lua,
  -- admit_readers): it takes its hold up, as it does when the wake-up that
  -- handed it the hold was missed or not trusted. (Only an RLock waits: an
  -- owner id is new to each call, so a TryRLock's was never let in.)
  admit = true
end
if not admit then
  local wait
  if writers then
    -- A writer waits and takes the lock first; its release lets this
    -- reader in. Look again by the first writer's deadline in case it
    -- died (heartbeats also purge the dead and wake the readers).
    wait = writers - server_ms()
  else
    wait = redis_call('pttl', KEYS[1])
  end
  if ARGV[3] == '0' or is_gone(KEYS[5], ARGV[1]) then
    return {0, wait}
  end
  return {0, wait_as_reader(KEYS[4], ARGV[1], ARGV[4], wait), recorded, server_ms()}
end
if others ~= 0 and is_gone(KEYS[5], ARGV[1]) then
  return {0, -1}
end
if state == 'write' then
  -- A writer a release handed the lock to holds a hash without a mode:
  -- name it, so that its release leaves the lock read-locked.
  redis_call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1)
  redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
elseif state == 'read' then
  redis_call('hset', KEYS[1], ARGV[1], 1)
  -- A held lock has an expiry: every script that makes one gives it one.
  redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
else
  redis_call('hset', KEYS[1], 'mode', 'read', ARGV[1], 1)
  redis_call('pexpire', KEYS[1], ARGV[2])
end
redis_call('zadd', KEYS[4], server_ms() + tonumber(ARGV[2]), ARGV[1])
if state == 'read' then
  -- Read-locked, the lock has readers, whose deadlines' key has an expiry.
  redis_call('pexpire', KEYS[4], ARGV[2], 'GT')
else
  extend(KEYS[4], ARGV[2])
end
return {1, next_token(KEYS[2])}
