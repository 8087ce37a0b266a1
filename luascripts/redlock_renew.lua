-- redlock_renew: renew a Redlock hold on one master, or take the master
-- back for its owner where the lock is free there. Runs after time.lua,
-- fence.lua and gone.lua.
--
-- A hold granted by a bare quorum would otherwise die with any one of its
-- masters. Taking a free master is safe: no other owner can hold a quorum
-- while this owner's renewal round finds one, since a master holds one
-- owner at a time; and the owner's fence raised to its token keeps later
-- tokens on that master above it.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2]  the fence counter
-- KEYS[3]  the gone owners (zset; see gone.lua): an owner released there
--          (Unlock records it) is never taken back by a late renewal
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  the hold's fencing token
--
-- Returns 1 when the master holds the lock for owner now (renewed or
-- taken), 0 when another owner or a lock of another kind holds it, or the
-- owner is gone.
local kind = redis_call('type', KEYS[1]).ok
if kind == 'string' then
  if redis_call('get', KEYS[1]) ~= ARGV[1] then
    return 0
  end
  extend(KEYS[1], ARGV[2])
  return 1
elseif kind ~= 'none' then
  return 0
end
if is_gone(KEYS[3], ARGV[1]) then
  return 0
end
redis_call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
if tonumber(redis_call('get', KEYS[2]) or '0') < tonumber(ARGV[3]) then
  redis_call('set', KEYS[2], ARGV[3])
end
redis_call('pexpire', KEYS[2], fence_ttl_ms)
return 1
