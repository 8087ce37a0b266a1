-- rw_write_acquire: take a read-write lock's write side for a new owner if
-- nobody holds the lock and no writer waits ahead of the owner; otherwise
-- queue the owner as a waiting writer (Lock) or not (TryLock). Runs after
-- time.lua, fence.lua, gone.lua, wake.lua, queue.lua, rw.lua and owner.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  the fence counter
-- KEYS[3]  waiting writers in arrival order (zset; see queue.lua)
-- KEYS[4]  readers' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0" not to queue the owner when not acquired (TryLock); "1" to
--          queue it as a waiting writer (Lock)
-- ARGV[4]  waiter timeout, milliseconds: a waiting writer that stops
--          heart-beating for this long no longer blocks new readers
-- ARGV[5]  wake-up channel
-- ARGV[6]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[7]  unused
-- ARGV[8]  unused (first attempt)
--
-- Waiting writers queue, and take the lock in arrival order: a writer
-- cannot be overtaken by later writers any more than by later readers
-- (writer preference). A grant that leaves writers queued wakes the new
-- first one by name, so that it sleeps until this lease's expiry rather
-- than until an earlier deadline.
--
-- Returns {1, token} when acquired. Returns {0, wait, queued[, now]} when
-- not (queue.lua, queued_reply), where wait is the lock's pttl, or,
-- read-locked, the milliseconds until the earliest reader's deadline if
-- sooner (a dead reader's hold ends then, though live readers keep the
-- lock's TTL longer), or, when the
-- lock is free but another writer is first, that writer's remaining
-- deadline (it is woken now). Returns {0, -1} for an owner recorded as
-- gone, and neither grants nor queues it: its caller gave up before this
-- attempt landed.
if is_gone(KEYS[5], ARGV[1]) then
  return {0, -1}
end
local state, wait = lock_state(KEYS[1])
if state == 'foreign' then
  return {0, wait or redis_call('pttl', KEYS[1])}
end
if state == 'write' and holds(KEYS[1], ARGV[1]) then
  -- A release handed the lock to this owner, a waiting writer (an owner
  -- id is new to each Lock: a re-entry does not come here). The grant
  -- has no mode (rw_release): name it.
  redis_call('hset', KEYS[1], 'mode', 'write')
  return take_up(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[6], ARGV[5])
end
local now = server_ms()
-- Dead readers keep writers out only while the lock is read-locked; a
-- write-locked lock's readers (its writer's chain's) wait for its release.
local free = state == 'free' or (state == 'read' and purge_readers(KEYS[1], KEYS[4], now))
-- Dead writers ahead of this one are purged as they come first
-- (queue_head); heartbeats purge the rest.
local head = queue_head(KEYS[3])
if free and (not head or head.owner == ARGV[1]) then
  if head then
    pop_head(KEYS[3], ARGV[6], ARGV[5])
  end
  redis_call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1)
  redis_call('pexpire', KEYS[1], ARGV[2])
  return {1, next_token(KEYS[2])}
end

local queued = join_queue(KEYS[3], ARGV[1], ARGV[3], ARGV[4], head, grant_hash)
if free then
  -- Another writer is first: hand it the lock, and look again by its
  -- deadline in case it died.
  wake_owner(ARGV[6], ARGV[5], head.owner)
  return queued_reply(behind_wait(head), queued)
end
wait = redis_call('pttl', KEYS[1])
if state == 'read' then
  -- The first reader's deadline is to come: purge_readers ended the holds
  -- whose deadline passed. A write-locked lock's readers are its writer's
  -- chain's, and dead ones among them keep nobody out before the writer's
  -- release, which wakes the waiters: their deadlines bound nothing (and
  -- a passed one would make the wait negative, a reply code).
  local first = redis_call('zrange', KEYS[4], 0, 0, 'WITHSCORES')
  if first[2] then
    wait = math.min(wait, tonumber(first[2]) - now)
  end
end
return queued_reply(wait, queued)
