-- reentrant_reenter: add a hold for the owner that holds a reentrant lock,
-- and refresh its lease to the full length (never longer).
--
-- KEYS[1]  the lock (hash: owner id -> hold count)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  hold count after this call
--
-- The caller knows its hold count and names it: a call retried after a lost
-- reply sets the same count again instead of counting twice.
--
-- Returns 1 when the owner holds the lock at that count, 0 when the owner
-- does not hold the lock (its lease expired or was taken).
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
