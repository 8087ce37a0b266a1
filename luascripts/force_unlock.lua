-- force_unlock: delete a lock whoever holds it, and wake the waiters. An
-- administrative action: the holder learns of it at its next renewal.
--
-- KEYS[1]  the lock
-- ARGV[1]  wake-up channel
-- ARGV[2]  publish command: "publish", or "spublish" in cluster mode
--
-- Returns 1 when a lock was deleted, 0 when it was not held.
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(ARGV[2], ARGV[1], '')
return 1
