-- rw_renew: extend a read-write lock hold's lease if its owner still holds
-- it, to at least the given length from now: a reader's deadline, and the
-- lock's TTL (neither ever shortened: other holders may need the TTL longer,
-- and an explicit extension may have set a later deadline). Never creates the lock. Runs after time.lua,
-- rw.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  readers' deadlines (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
if not holds(KEYS[1], ARGV[1]) then
  return 0
end
local deadline = redis_call('zscore', KEYS[2], ARGV[1])
if deadline then
  local now = server_ms()
  if tonumber(deadline) <= now then
    return 0 -- its deadline passed: another operation may purge it now
  end
  redis_call('zadd', KEYS[2], 'GT', now + tonumber(ARGV[2]), ARGV[1]) -- never earlier
  extend(KEYS[2], ARGV[2])
end
extend(KEYS[1], ARGV[2])
return 1
