-- waiter_heartbeat: extend a waiting owner's deadline (fair lock waiters,
-- read-write lock writers waiting), if it is still waiting.
--
-- KEYS[1]  the queue (list), possibly absent
-- KEYS[2]  the waiters' deadlines (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  waiter timeout, milliseconds
--
-- Returns 1 when extended, 0 when the owner is no longer waiting (it was
-- purged, or it acquired).
if not redis.call('zscore', KEYS[2], ARGV[1]) then
  return 0
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zadd', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('pexpire', KEYS[2], ARGV[2])
if redis.call('exists', KEYS[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return 1
