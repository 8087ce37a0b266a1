-- rw_reenter: add a hold for an owner that holds a read-write lock's read
-- or write side, and refresh its lease to the full length. Readers re-enter
-- even while a writer waits: their chain holds the lock already. Runs after
-- rw.lua.
--
-- KEYS[1]  the lock (hash: "mode" -> "read"|"write", owner id -> holds)
-- KEYS[2]  readers' deadlines (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  hold count after this call
--
-- Returns 1 when the owner holds the lock at that count, 0 when it does not
-- hold the lock.
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[3])
if redis.call('zscore', KEYS[2], ARGV[1]) then
  redis.call('zadd', KEYS[2], server_ms() + tonumber(ARGV[2]), ARGV[1])
  extend(KEYS[2], ARGV[2])
end
extend(KEYS[1], ARGV[2])
return 1
