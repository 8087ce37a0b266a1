-- force_unlock: delete a lock whoever holds it, and wake the waiters. An
-- administrative action: the holder learns of it at its next renewal.
-- Runs after time.lua and gone.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the readers' deadlines (a read-write lock's; absent for others):
--          deleted with the lock, since they belong to its holders. Waiting
--          writers and a fair queue keep their places.
-- KEYS[3]  the gone owners (zset; see gone.lua)
-- ARGV[1]  wake-up channel
-- ARGV[2]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[3]  gone, milliseconds: how long the evicted owner of a string lock
--          is recorded as gone, so that a Redlock renewal does not take the
--          master back for it; "0" for a lock on one master, whose evicted
--          owner may be a waiter just handed the lock and still acquiring
--
-- Returns 1 when a lock was deleted, 0 when it was not held.
local owner = nil
if redis.call('type', KEYS[1]).ok == 'string' then
  owner = redis.call('get', KEYS[1])
end
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
if KEYS[2] then
  redis.call('del', KEYS[2])
end
if owner and KEYS[3] then
  record_gone(KEYS[3], owner, ARGV[3])
end
redis.call(ARGV[2], ARGV[1], '')
return 1
