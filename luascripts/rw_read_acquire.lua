-- rw_read_acquire: take a read-write lock's read side for a new owner.
-- Runs after time.lua, fence.lua, gone.lua and rw.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  the fence counter
-- KEYS[3]  waiting writers in arrival order (list; see queue.lua)
-- KEYS[4]  waiting writers' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  readers' deadlines (zset: owner id -> server time, ms)
-- KEYS[6]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  unused (readers never queue)
-- ARGV[4]  unused (waiter timeout)
-- ARGV[5]  unused (wake-up channel)
-- ARGV[6]  unused (publish command)
-- ARGV[7]  owner id of the write hold of the caller's call chain, or ""
--
-- Readers are admitted when the lock is free or read-locked and no writer
-- waits (writer preference: readers cannot starve writers), or, while the
-- lock is write-locked, when the caller's own chain holds the write side
-- (downgrade).
--
-- A reader does not purge dead readers: they keep no reader out. Writer
-- attempts and releases purge them (rw.lua, purge).
--
-- Returns {1, token} when acquired, {0, wait} when not: the lock's pttl,
-- or, when it is free but writers wait, the last one's remaining deadline.
-- Returns {0, -1} for an owner recorded as gone, and takes nothing: its
-- caller gave up before this attempt landed. (An attempt that is refused
-- changes nothing, gone or not: only one that would be admitted asks.)
-- The mode, and a lock of another kind (see rw.lua, foreign) in one
-- command when the lock is a read-write lock or free.
local mode = redis.pcall('hget', KEYS[1], 'mode')
if type(mode) == 'table' or (not mode and redis.call('exists', KEYS[1]) == 1) then
  return {0, redis.call('pttl', KEYS[1])}
end

local admit, writers
if mode == 'write' then
  admit = ARGV[7] ~= '' and redis.call('hexists', KEYS[1], ARGV[7]) == 1
else
  writers = writers_wait(KEYS[4], KEYS[3])
  admit = not writers
end
if not admit then
  if mode then
    return {0, redis.call('pttl', KEYS[1])}
  end
  -- Free, but writers wait and will take it: look again by the last one's
  -- deadline in case they all died (heartbeats also purge the dead and
  -- wake the readers).
  return {0, writers - server_ms()}
end
if is_gone(KEYS[6], ARGV[1]) then
  return {0, -1}
end
if mode then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  -- A held lock has an expiry: every script that makes one gives it one.
  redis.call('pexpire', KEYS[1], ARGV[2], 'GT')
else
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
end
redis.call('zadd', KEYS[5], server_ms() + tonumber(ARGV[2]), ARGV[1])
if mode == 'read' then
  -- Read-locked, the lock has readers, whose deadlines' key has an expiry.
  redis.call('pexpire', KEYS[5], ARGV[2], 'GT')
else
  extend(KEYS[5], ARGV[2])
end
return {1, next_token(KEYS[2])}
