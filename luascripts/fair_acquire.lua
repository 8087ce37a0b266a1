-- fair_acquire: take a fair lock for a new owner if it is free and the owner
-- is first in the queue; otherwise queue the owner (Lock) or not (TryLock).
-- Runs after time.lua, fence.lua, gone.lua, queue.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- KEYS[2]  the fence counter
-- KEYS[3]  the queue (list of waiting owner ids, in arrival order)
-- KEYS[4]  the waiters' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  unused (readers)
-- KEYS[6]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0" not to queue the owner when not acquired (TryLock); else
--          queue it (Lock: a fair waiter queues from its first attempt)
-- ARGV[4]  waiter timeout, milliseconds: a waiter whose deadline passes
--          without a heartbeat or an attempt is purged from the queue
-- ARGV[5]  wake-up channel
-- ARGV[6]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[7]  unused
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
local head, deadline, gone = look_ahead(KEYS[6], KEYS[3], KEYS[4], ARGV[1])
if gone then
  return {0, -1}
end
-- The lock's time to live, -2 when it is free: one command for both.
local pttl = redis.call('pttl', KEYS[1])
local free = pttl == -2
if not free and holds(KEYS[1], ARGV[1]) then
  -- A release handed the lock to this owner, a queued waiter (an owner id
  -- is new to each Lock: a re-entry does not come here).
  return take_up(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[6], ARGV[5])
end
if free and (not head or head == ARGV[1]) then
  if head then
    pop_head(KEYS[3], KEYS[4], ARGV[1], ARGV[6], ARGV[5])
  end
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, next_token(KEYS[2])}
end

local queued = 0
if ARGV[3] ~= '0' then
  enqueue(KEYS[3], KEYS[4], ARGV[1], ARGV[4], head)
  queued = 1
end

if not free then
  -- Released, the lock goes to the first waiter; expiring, it wakes
  -- nobody, but the first waiter sleeps no longer than this pttl, and
  -- those behind it no longer than its deadline (held_wait). Heartbeats
  -- purge a first waiter that died.
  return queued_reply(held_wait(pttl, ARGV[1], head, deadline), queued)
end
-- Free, but another waiter is first: hand it the lock, and look again by
-- its deadline in case it died.
wake_owner(ARGV[6], ARGV[5], head)
return queued_reply(deadline - server_ms(), queued)
