-- mutex_acquire: take a plain mutex if it is free and no starving waiter is
-- ahead of the owner, and issue its fencing token; otherwise queue the
-- owner if it asks to. Runs after time.lua, fence.lua, gone.lua,
-- wake.lua and queue.lua.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2]  the fence counter (string: last token issued)
-- KEYS[3]  the queue of starving waiters (zset; see queue.lua)
-- KEYS[4]  unused (readers)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0": never queue (TryLock, Redlock); "1": queue when not
--          acquired (a waiter that has waited long: starving); "2": queue
--          only behind waiters queued already (a waiter not starving yet)
-- ARGV[4]  waiter timeout, milliseconds: a queued waiter whose deadline
--          passes without a heartbeat or an attempt is purged
-- ARGV[5]  wake-up channel
-- ARGV[6]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[7]  unused
-- ARGV[8]  "1" for the owner's first attempt, else anything: no release
--          can have handed the lock to an owner no attempt queued yet
--
-- Starvation, as sync.Mutex has it: while nobody is queued, whoever comes
-- first takes the lock, newcomers included. A waiter that has waited long
-- takes a place in the queue, and from then on the lock goes in queue
-- order: newcomers wait behind it. A grant that leaves waiters queued wakes
-- the new first waiter by name, so that it sleeps until this lease's
-- expiry rather than until an earlier deadline.
--
-- A release hands the lock to the first queued waiter (queue.lua, hand_on),
-- whose Lock holds it on the wake-up; an attempt of that waiter's takes the
-- grant up instead (take_up) when it missed the wake-up, has a fixed lease,
-- or waits for replicas.
--
-- Returns {1, token} when acquired. Returns {0, wait, queued[, now]} when
-- not (queue.lua, queued_reply):
-- wait is the holder's remaining time to live in milliseconds (-1 when the
-- key has no expiry), or, when the lock is free but another waiter is
-- first, that waiter's remaining deadline (it is woken now); queued is 1
-- when the owner is queued, else 0. The lock may be held by a
-- lock of another kind with the same name. Returns {0, -1} for an owner
-- recorded as gone, and neither takes nor queues: its caller gave up
-- before this attempt landed.
-- The uncontended acquire first, in as few steps as it takes: nobody gone,
-- nobody queued and the lock free (look_ahead's EXISTS, the lock named
-- four times: 0 says all three), so that the lock is this owner's.
local seen = redis_call('exists', KEYS[5], KEYS[3], KEYS[3], KEYS[1], KEYS[1], KEYS[1], KEYS[1])
if seen == 0 then
  redis_call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, next_token(KEYS[2])}
end
local head, gone, locked = look_ahead(KEYS[5], KEYS[3], KEYS[1], ARGV[1], seen)
if gone then
  return {0, -1}
end
if head and head.owner ~= ARGV[1] then
  -- Another waiter is first: the lock is its. Whether the lock is free,
  -- handed to this owner, or held: the EXISTS above says for a first
  -- attempt, one GET for a later one (queue.lua, look_at_lock and
  -- behind_head).
  local probe = look_at_lock(KEYS[1], locked, ARGV[8] == '1', 'get')
  return behind_head(KEYS[1], KEYS[2], KEYS[3], ARGV[1], probe, ARGV[2],
    ARGV[3], ARGV[4], grant_string, head, ARGV[6], ARGV[5])
end
-- Nobody is first but this owner, if anyone. SET NX GET takes a free lock,
-- or says who holds it (an error: a lock of another kind).
local v = redis_pcall('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2], 'GET')
if not v then
  if head then
    pop_head(KEYS[3], ARGV[6], ARGV[5])
  end
  return {1, next_token(KEYS[2])}
end
if v == ARGV[1] then
  -- A release handed the lock to this owner, a queued waiter.
  return take_up(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[6], ARGV[5])
end
local queued = join_queue(KEYS[3], ARGV[1], ARGV[3], ARGV[4], head, grant_string)
return queued_reply(held_wait(redis_call('pttl', KEYS[1]), ARGV[1], head), queued)
