-- mutex_release: release a plain mutex if the caller still owns it, and
-- hand it to the first starving waiter or wake a waiter. For an owner that
-- does not hold the lock, leave the queue of starving waiters instead (a
-- waiter giving up). Runs after time.lua, fence.lua, gone.lua,
-- wake.lua and queue.lua.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2]  the queue of starving waiters (zset; see queue.lua)
-- KEYS[3]  unused (readers)
-- KEYS[4]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- KEYS[5]  the fence counter (the token of a handed-on grant)
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  hold depth being ended: ignored, a mutex is held once
-- ARGV[5]  gone, milliseconds: "0" for a normal release; n > 0 also records
--          the owner as gone for n ms, so that its acquire, if still on its
--          way, is refused when it lands
--
-- With waiters queued, the lock goes to the first of them at once, held as
-- that waiter's kind holds it (a string, or a hash for a reentrant or
-- fair lock's waiter), and the wake-up names it (queue.lua, hand_on). With nobody queued, its payload "one" asks each client to wake only its
-- longest waiter: only one waiter can take the lock, so waking all would
-- only make them race.
--
-- Returns 1 when released, 0 when the lock was not held by this owner (it
-- expired, was force-unlocked, another owner holds it now, or a lock of
-- another kind took the name: the key is not a string).
record_gone(KEYS[4], ARGV[1], ARGV[5]) -- the script is atomic: order is free
if redis_pcall('get', KEYS[1]) ~= ARGV[1] then
  if dequeue(KEYS[2], ARGV[1]) and redis_call('exists', KEYS[1]) == 0 then
    wake_first(KEYS[2], ARGV[3], ARGV[2], 'one')
  end
  return 0
end
-- One ZPOPMIN says whether anyone is queued, the uncontended release's
-- case (the lock is then deleted), and takes the first waiter if so.
local first = redis_call('zpopmin', KEYS[2], 2)
if not first[1] or not hand_on(KEYS[5], KEYS[2], KEYS[1], true, ARGV[3], ARGV[2], first) then
  redis_call('del', KEYS[1])
  redis_call(ARGV[3], ARGV[2], 'one')
end
return 1
