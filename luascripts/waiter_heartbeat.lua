-- waiter_heartbeat: extend a waiting owner's deadline (fair lock waiters,
-- read-write lock writers waiting), if it is still waiting; and purge the
-- waiters whose deadline passed, waking whoever may proceed now. Runs after
-- time.lua, fence.lua, gone.lua, wake.lua and queue.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the queue (zset; see queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  waiter timeout, milliseconds
-- ARGV[3]  wake-up channel
-- ARGV[4]  publish command: "publish", or "spublish" in cluster mode
--
-- Live waiters heartbeat every timeout/3. Dead waiters are purged as they
-- come first (queue.lua, queue_head), here too: a first waiter that died
-- is purged within a timeout and a third, without anybody polling for it.
-- When that leaves the lock free, the first waiter left is woken by name;
-- with no waiter left, every waiter is (readers held back by a dead
-- writer).
--
-- The queue's expiry is only ever extended: waiters may have different
-- timeouts, and a short one must not make it expire under a waiter with a
-- long one.
--
-- Returns 1 when extended, 0 when the owner is no longer waiting (it was
-- purged, or it acquired).
local head, purged = queue_head(KEYS[2])
if purged and redis_call('exists', KEYS[1]) == 0 then
  if head then
    wake_owner(ARGV[4], ARGV[3], head.owner)
  else
    redis_call(ARGV[4], ARGV[3], '')
  end
end
local w = head
if not head or head.owner ~= ARGV[1] then
  w = find_waiter(KEYS[2], ARGV[1])
end
if not w then
  return 0
end
if w.deadline <= server_ms() then
  -- Its deadline passed: it is purged, as it would be when first.
  local arrival = arrival_of(KEYS[2], w)
  redis_call('zremrangebyscore', KEYS[2], arrival, arrival)
  return 0
end
renew_waiter(KEYS[2], w, ARGV[2])
return 1
