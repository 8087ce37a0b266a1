-- rw_release: end one hold of a read-write lock's owner, and wake waiters
-- when the lock changes hands. For an owner that does not hold the lock,
-- withdraw it as a waiting writer or reader instead (a waiter giving up).
-- Runs after time.lua, fence.lua, gone.lua, wake.lua, queue.lua, rw.lua
-- and owner.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  waiting writers in arrival order (zset; see queue.lua)
-- KEYS[3]  readers' deadlines (zset)
-- KEYS[4]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- KEYS[5]  the fence counter (the tokens of handed-on grants)
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  hold count being ended: n > 1 leaves n - 1 holds; 1, or 0 for
--          all holds, releases the owner's hold
-- ARGV[5]  gone, milliseconds: "0" for a normal release; n > 0 also records
--          the owner as gone for n ms, so that its acquire, if still on its
--          way, is refused when it lands (and does not register it again
--          as a waiting writer)
--
-- A writer's release lets the readers waiting at that moment in and hands
-- each its hold by name (rw.lua, admit_readers): they need no attempt, and
-- nobody else is woken (the queued writers wait for their turn, which
-- names them). Otherwise, releasing
-- the last holder hands the lock to the first waiting writer, if one
-- waits, and wakes it by name with the grant's token (queue.lua, hand_on:
-- no reader may enter before it), else wakes every waiter (the readers may
-- all enter). The first in the queue may be a waiter of another kind with
-- the same name: it is granted the lock as its kind holds it (queue.lua,
-- grant_lock). A writer's grant is what the reentrant and fair lock hold,
-- a hash of the owner's id -> 1 without a mode, and a writer names its
-- mode when it first needs it (rw.lua, lock_state).
--
-- Returns 1 when released, 0 when the owner did not hold the lock.
record_gone(KEYS[4], ARGV[1], ARGV[5]) -- the script is atomic: order is free
local ended = end_holds(KEYS[1], ARGV[1], ARGV[4])
if not ended then
  redis_call('zrem', KEYS[3], ARGV[1]) -- a waiting reader's record
  if dequeue(KEYS[2], ARGV[1]) then
    if redis_call('exists', KEYS[2]) == 0 then
      redis_call(ARGV[3], ARGV[2], 'unqueued') -- readers held back by this writer may enter
    elseif redis_call('exists', KEYS[1]) == 0 then
      wake_first(KEYS[2], ARGV[3], ARGV[2]) -- the writer first now
    end
  end
  return 0
end
if ended == 'kept' then
  return 1
end
local reader = redis_call('zrem', KEYS[3], ARGV[1]) == 1
if redis_call('hlen', KEYS[1]) <= 1 then
  -- No holder is left (the mode alone, or nothing). A writer's release
  -- lets the readers waiting now in before the next writer, and hands
  -- them their holds (rw.lua, admit_readers). Else the
  -- first waiting writer takes the lock now, and no reader may enter
  -- before it (direct handoff: queue.lua, hand_on). With no writer
  -- waiting, wake every waiter: the readers may all enter.
  redis_call('del', KEYS[1])
  if not reader and admit_readers(KEYS[1], KEYS[3], KEYS[5], ARGV[3], ARGV[2], true) then
    return 1
  end
  if not hand_on(KEYS[5], KEYS[2], KEYS[1], false, ARGV[3], ARGV[2]) then
    redis_call(ARGV[3], ARGV[2], '')
  end
  return 1
end
if not reader and redis_call('hget', KEYS[1], 'mode') == 'write' then
  -- The writer left readers of its own chain (a downgrade): the lock is
  -- read-locked now, and the readers waiting join them, handed their
  -- holds (rw.lua, admit_readers); others may join while no writer waits.
  redis_call('hset', KEYS[1], 'mode', 'read')
  admit_readers(KEYS[1], KEYS[3], KEYS[5], ARGV[3], ARGV[2], false)
end
return 1
