-- reentrant_release: end one hold of a reentrant lock's owner; the last hold
-- hands the lock to the first starving waiter, or deletes it and wakes a
-- waiter. For an owner that does not hold the lock, leave the queue of
-- starving waiters instead (a waiter giving up). Runs after time.lua,
-- fence.lua, gone.lua, queue.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- KEYS[2]  the queue of starving waiters (zset; see queue.lua)
-- KEYS[3]  unused (readers)
-- KEYS[4]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- KEYS[5]  the fence counter (the token of a handed-on grant)
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  hold count being ended: n > 1 leaves n - 1 holds; 1, or 0 for
--          all holds, releases the lock
-- ARGV[5]  gone, milliseconds: "0" for a normal release; n > 0 also records
--          the owner as gone for n ms, so that its acquire, if still on its
--          way, is refused when it lands
--
-- The caller names the count it ends: a call retried after a lost reply
-- sets the same count again instead of counting down twice.
--
-- With waiters queued, the lock goes to the first of them at once, and the
-- wake-up names it (queue.lua, hand_on). With nobody queued, its payload "one" asks each client to wake only its
-- longest waiter: only one waiter can take the lock, so waking all would
-- only make them race.
--
-- Returns 1 when released, 0 when the owner does not hold the lock.
record_gone(KEYS[4], ARGV[1], ARGV[5]) -- the script is atomic: order is free
local ended = end_holds(KEYS[1], ARGV[1], ARGV[4])
if not ended then
  if dequeue(KEYS[2], ARGV[1]) and redis_call('exists', KEYS[1]) == 0 then
    wake_first(KEYS[2], ARGV[3], ARGV[2], 'one')
  end
  return 0
end
if ended == 'kept' then
  return 1
end
if not hand_on(KEYS[5], KEYS[2], KEYS[1], false, ARGV[3], ARGV[2]) then
  redis_call(ARGV[3], ARGV[2], 'one')
end
return 1
