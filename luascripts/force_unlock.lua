-- force_unlock: delete a lock whoever holds it, wake the waiters, and tell
-- each holder's client that its hold ended (tell_lost), so that it learns
-- at once, not at its next renewal (which still finds it if the notice is
-- lost). Runs after time.lua, gone.lua and wake.lua.
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
local holders = {}
local kind = redis_call('type', KEYS[1]).ok
if kind == 'string' then
  owner = redis_call('get', KEYS[1])
  holders = {owner}
elseif kind == 'hash' then
  -- owner id -> hold count (a semaphore's: "permits token expiry"); a
  -- read-write lock's "mode" field is no owner, nor are a semaphore's
  -- "size", "used", "keep" and "due" (owner ids hold a ':').
  for _, field in ipairs(redis_call('hkeys', KEYS[1])) do
    if string_find(field, ':', 1, true) then
      holders[#holders + 1] = field
    end
  end
end
if redis_call('del', KEYS[1]) == 0 then
  return 0
end
if KEYS[2] then
  redis_call('del', KEYS[2])
end
if owner and KEYS[3] then
  record_gone(KEYS[3], owner, ARGV[3])
end
redis_call(ARGV[2], ARGV[1], '')
for _, holder in ipairs(holders) do
  tell_lost(ARGV[1], holder)
end
return 1
