-- mutex_release: release a plain mutex if the caller still owns it, and wake
-- the waiters. Runs after time.lua and gone.lua.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2..4] unused (queue, waiters, readers)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  hold depth being ended: ignored, a mutex is held once
-- ARGV[5]  gone, milliseconds: "0" for a normal release; n > 0 also records
--          the owner as gone for n ms, so that its acquire, if still on its
--          way, is refused when it lands
--
-- The wake-up's payload "one" asks each client to wake only its longest
-- waiter: only one waiter can take the lock, so waking all would only make
-- them race.
--
-- Returns 1 when released, 0 when the lock was not held by this owner (it
-- expired, was force-unlocked, another owner holds it now, or a lock of
-- another kind took the name: the key is not a string).
record_gone(KEYS[5], ARGV[1], ARGV[5]) -- the script is atomic: order is free
if redis.call('type', KEYS[1]).ok ~= 'string' or redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], 'one')
return 1
