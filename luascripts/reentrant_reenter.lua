-- reentrant_reenter: add a hold for the owner that holds a reentrant (or
-- fair) lock, and extend its expiry to at least the lease. Runs after
-- time.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  hold count after this call
--
-- The caller knows its hold count and names it: a call retried after a lost
-- reply sets the same count again instead of counting twice.
--
-- A re-entry never shortens the lock's expiry: the hold's first lease (a
-- watchdog's, say) may be longer than the one this call passes, and its
-- holder counts on it (its ValidUntil).
--
-- Returns 1 when the owner holds the lock at that count, 0 when the owner
-- does not hold the lock (its lease expired or was taken).
if not holds(KEYS[1], ARGV[1]) then
  return 0
end
redis_call('hset', KEYS[1], ARGV[1], ARGV[3])
extend(KEYS[1], ARGV[2])
return 1
