-- mutex_release: release a plain mutex if the caller still owns it, and wake
-- the waiters.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2..4] passed by the engine for every kind (see internal/kind.Spec);
--          unused here
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  hold depth being ended: ignored, a mutex is held once
--
-- The wake-up's payload "one" asks each client to wake only its longest
-- waiter: only one waiter can take the lock, so waking all would only make
-- them race.
--
-- Returns 1 when released, 0 when the lock was not held by this owner (it
-- expired, was force-unlocked, or another owner holds it now).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], ARGV[2], 'one')
return 1
