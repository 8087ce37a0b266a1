-- fair_acquire: take a fair lock for a new owner if it is free and the owner
-- is first in the queue; otherwise queue the owner (Lock) or not (TryLock).
-- Runs after time.lua, fence.lua, gone.lua, queue.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- KEYS[2]  the fence counter
-- KEYS[3]  the queue (zset: the waiters in arrival order; see queue.lua)
-- KEYS[4]  unused (readers)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0" not to queue the owner when not acquired (TryLock); "1" to
--          queue it (Lock: a fair waiter queues from its first attempt)
-- ARGV[4]  waiter timeout, milliseconds: a waiter whose deadline passes
--          without a heartbeat or an attempt is purged from the queue
-- ARGV[5]  wake-up channel
-- ARGV[6]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[7]  unused
-- ARGV[8]  "1" for the owner's first attempt, else anything: no release
--          can have handed the lock to an owner no attempt queued yet
--
-- A grant that leaves waiters queued wakes the new first waiter by name.
-- It may be sleeping until the previous first waiter's deadline (it found
-- the lock free but was not first); woken, it finds the lock held and
-- sleeps until this lease's expiry instead, so that a lease that expires
-- without an Unlock hands the lock on as promptly as an Unlock does.
--
-- A release hands the lock to the first queued waiter (queue.lua, hand_on),
-- whose Lock holds it on the wake-up; an attempt of that waiter's takes the
-- grant up instead (take_up) when it missed the wake-up, has a fixed lease,
-- or waits for replicas.
--
-- Returns {1, token} when acquired. Returns {0, wait, queued[, now]} when
-- not, where wait is how long in milliseconds nothing can change without a
-- wake-up: the holder's pttl, or, when the lock is free but another waiter
-- is first, that waiter's remaining deadline (it is woken now); queued is 1
-- when the owner is queued (a Lock), and then now is the server's clock in
-- ms (queue.lua, queued_reply). Returns {0, -1} for an
-- owner recorded as gone, and neither grants nor queues: its caller gave up
-- before this attempt landed.
local first = ARGV[8] == '1'
local head, gone, locked = look_ahead(KEYS[5], KEYS[3], KEYS[1], ARGV[1])
if gone then
  return {0, -1}
end
if head and head.owner ~= ARGV[1] then
  -- Another waiter is first: the lock is its. Whether the lock is free,
  -- handed to this owner, or held (by a lock of another kind too): the
  -- EXISTS above says for a first attempt, one HRANDFIELD for a later one
  -- (queue.lua, look_at_lock and behind_head).
  local probe = look_at_lock(KEYS[1], locked, first, 'hrandfield')
  return behind_head(KEYS[1], KEYS[2], KEYS[3], ARGV[1], probe, ARGV[2],
    ARGV[3], ARGV[4], grant_hash, head, ARGV[6], ARGV[5])
end
-- Nobody is first but this owner, if anyone.
if not locked then
  if head then
    pop_head(KEYS[3], ARGV[6], ARGV[5])
  end
  redis_call('hset', KEYS[1], ARGV[1], 1)
  redis_call('pexpire', KEYS[1], ARGV[2])
  return {1, next_token(KEYS[2])}
end
if not first and holds(KEYS[1], ARGV[1]) then
  -- A release handed the lock to this owner, a queued waiter (an owner id
  -- is new to each Lock: a re-entry does not come here).
  return take_up(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[6], ARGV[5])
end
local queued = join_queue(KEYS[3], ARGV[1], ARGV[3], ARGV[4], head, grant_hash)
return queued_reply(held_wait(redis_call('pttl', KEYS[1]), ARGV[1], head), queued)
