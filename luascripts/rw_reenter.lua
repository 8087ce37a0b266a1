-- rw_reenter: add a hold for an owner that holds a read-write lock's read
-- or write side, and extend its lease to at least the given length. Readers
-- re-enter even while a writer waits: their chain holds the lock already.
-- Runs after time.lua, rw.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  readers' deadlines (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  hold count after this call
--
-- A re-entry never shortens anything: not the reader's deadline, not the
-- readers' or the lock's expiry. The hold's first lease (a watchdog's, say)
-- may be longer than the one this call passes, and its holder counts on it
-- (its ValidUntil).
--
-- Returns 1 when the owner holds the lock at that count, 0 when it does not
-- hold the lock.
if not holds(KEYS[1], ARGV[1]) then
  return 0
end
redis_call('hset', KEYS[1], ARGV[1], ARGV[3])
local deadline = redis_call('zscore', KEYS[2], ARGV[1])
if deadline then
  local later = server_ms() + tonumber(ARGV[2])
  if later > tonumber(deadline) then
    redis_call('zadd', KEYS[2], later, ARGV[1])
  end
  extend(KEYS[2], ARGV[2])
end
extend(KEYS[1], ARGV[2])
return 1
