-- mutex_acquire: take a plain mutex if it is free, and issue its fencing
-- token. Runs after fence.lua, time.lua and gone.lua.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2]  the fence counter (string: last token issued)
-- KEYS[3..5] unused (queue, waiters, readers)
-- KEYS[6]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- The engine passes more ARGV, the same for every kind (see
-- internal/kind.Spec); this script does not use them.
--
-- Returns {1, token} when acquired. Returns {0, pttl} when the lock is held
-- (by another mutex owner, or by a lock of another kind with the same name):
-- the holder's remaining time to live in milliseconds, -1 when the key has
-- no expiry. Returns {0, -1} for an owner recorded as gone, and takes
-- nothing: its caller gave up before this attempt landed.
if is_gone(KEYS[6], ARGV[1]) then
  return {0, -1}
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('pttl', KEYS[1])}
end
return {1, next_token(KEYS[2])}
