-- fair_release: end one hold of a fair lock's owner; the last hold hands
-- the lock to the first waiter (or deletes it, with nobody waiting). For an
-- owner that does not hold the lock, leave the queue instead (a waiter
-- giving up), waking the new first waiter if the lock is free. Runs after
-- time.lua, fence.lua, gone.lua, queue.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- KEYS[2]  the queue (zset; see queue.lua)
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
--          way, is refused when it lands (and does not queue it again)
--
-- Wake-ups name the owner they are for: only that waiter retries. The
-- last release hands the lock to the first waiter at once (queue.lua,
-- hand_on). With nobody queued, a fair lock has no waiter, but locks of
-- other kinds with the same name may (a read-write lock's readers, which
-- never queue): the release wakes every waiter ("" payload), as theirs
-- would. So does a waiter leaving the queue of a free lock last.
--
-- Returns 1 when released, 0 when the owner did not hold the lock.
record_gone(KEYS[4], ARGV[1], ARGV[5]) -- the script is atomic: order is free
local ended = end_holds(KEYS[1], ARGV[1], ARGV[4])
if not ended then
  if dequeue(KEYS[2], ARGV[1]) and redis_call('exists', KEYS[1]) == 0 then
    wake_first(KEYS[2], ARGV[3], ARGV[2], '')
  end
  return 0
end
if ended == 'kept' then
  return 1
end
if not hand_on(KEYS[5], KEYS[2], KEYS[1], false, ARGV[3], ARGV[2]) then
  redis_call(ARGV[3], ARGV[2], '')
end
return 1
