-- rw_write_acquire: take a read-write lock's write side for a new owner if
-- nobody holds the lock; otherwise register the owner as a waiting writer
-- (Lock) or not (TryLock). Runs after fence.lua, time.lua, gone.lua and
-- rw.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  the fence counter
-- KEYS[3]  unused (queue)
-- KEYS[4]  waiting writers' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  readers' deadlines (zset: owner id -> server time, ms)
-- KEYS[6]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "1" to register as a waiting writer when not acquired, "0" not
-- ARGV[4]  waiter timeout, milliseconds: a waiting writer that stops
--          heart-beating for this long no longer blocks new readers
-- ARGV[5]  unused (wake-up channel)
-- ARGV[6]  unused (publish command)
-- ARGV[7]  unused
--
-- Returns {1, token} when acquired. Returns {0, wait} when not: the
-- milliseconds until the earliest holder's deadline (a dead reader's hold
-- ends then, though live readers keep the lock's TTL longer). Returns
-- {0, -1} for an owner recorded as gone, and neither grants nor registers
-- it as a waiting writer: its caller gave up before this attempt landed.
--
-- The waiting writers' expiry is only ever extended: writers may have
-- different waiter timeouts.
if is_gone(KEYS[6], ARGV[1]) then
  return {0, -1}
end
if foreign(KEYS[1]) then
  return {0, redis.call('pttl', KEYS[1])}
end
local now = server_ms()
purge(KEYS[1], KEYS[5], KEYS[4], now)

if redis.call('exists', KEYS[1]) == 0 then
  redis.call('zrem', KEYS[4], ARGV[1])
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, next_token(KEYS[2])}
end

if ARGV[3] == '1' then
  redis.call('zadd', KEYS[4], now + tonumber(ARGV[4]), ARGV[1])
  extend(KEYS[4], ARGV[4])
end
local wait = redis.call('pttl', KEYS[1])
local first = redis.call('zrange', KEYS[5], 0, 0, 'WITHSCORES')
if first[2] then
  wait = math.min(wait, tonumber(first[2]) - now)
end
return {0, wait}
