-- waiter_heartbeat: extend a waiting owner's deadline (fair lock waiters,
-- read-write lock writers waiting), if it is still waiting; and purge the
-- waiters whose deadline passed, waking whoever may proceed now. Runs after
-- time.lua.
--
-- KEYS[1]  the lock
-- KEYS[2]  the queue (list of waiting owner ids; absent for rwlock)
-- KEYS[3]  the waiters' deadlines (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  waiter timeout, milliseconds
-- ARGV[3]  wake-up channel
-- ARGV[4]  publish command: "publish", or "spublish" in cluster mode
--
-- Live waiters heartbeat every timeout/3, so a dead one is purged within a
-- timeout and a third, without anybody polling for it. When the lock is
-- free, the first waiter left is woken by name; with no waiter left, every
-- waiter is (readers held back by a dead writer).
--
-- The queue's and the deadlines' expiries are only ever extended: waiters
-- may have different timeouts, and a short one must not make the keys
-- expire under a waiter with a long one.
--
-- Returns 1 when extended, 0 when the owner is no longer waiting (it was
-- purged, or it acquired).
local now = server_ms()

local purged = false
for _, dead in ipairs(redis.call('zrangebyscore', KEYS[3], '-inf', now)) do
  redis.call('zrem', KEYS[3], dead)
  redis.call('lrem', KEYS[2], 1, dead)
  purged = true
end
if purged and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    wake_owner(ARGV[4], ARGV[3], head)
  elseif redis.call('zcard', KEYS[3]) == 0 then
    redis.call(ARGV[4], ARGV[3], '')
  end
end

if not redis.call('zscore', KEYS[3], ARGV[1]) then
  return 0
end
redis.call('zadd', KEYS[3], 'XX', now + tonumber(ARGV[2]), ARGV[1])
extend(KEYS[3], ARGV[2])
extend(KEYS[2], ARGV[2])
return 1
