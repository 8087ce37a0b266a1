-- semaphore_renew: extend a holding of a semaphore's permits, if it is
-- still held, to at least the given length from now; never shortens it
-- (an explicit extension may have made it longer). A holding whose expiry
-- has passed is not revived: its permits may have gone to others. Runs
-- after time.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua: the holder's field is
--          "n token expiry")
-- KEYS[2]  the holders' expiries that earlier scripts kept (zset: owner
--          id -> server time, ms): a field they wrote, "n token", has its
--          expiry there
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds its permits.
local v = redis_pcall('hmget', KEYS[1], ARGV[1], 'due')
if v.err or not v[1] then
  return 0
end
local field = v[1]
local space = string_find(field, ' ', 1, true)
if not space then
  return 0 -- no semaphore's holding (another kind's field)
end
local now = server_ms()
local at = now + ARGV[2]
-- The field's expiry follows its second space (semaphore.lua, holding);
-- a field of earlier scripts, "n token", has it in their zset, KEYS[2].
local second = string_find(field, ' ', space + 1, true)
local expiry
if second then
  expiry = string_sub(field, second + 1) + 0
else
  expiry = redis_call('zscore', KEYS[2], ARGV[1])
  expiry = expiry and expiry + 0
end
if expiry and expiry <= now then
  return 0
end
local at_string = string_format('%d', at)
if not second then
  -- The field's first expiry: due (semaphore.lua, purge) may be later,
  -- as purge knew none for it, and must come no later.
  if v[2] and at < v[2] + 0 then
    redis_call('hset', KEYS[1], ARGV[1], field .. ' ' .. at_string, 'due', at_string)
  else
    redis_call('hset', KEYS[1], ARGV[1], field .. ' ' .. at_string)
  end
elseif at > expiry then
  -- Due is no later than the old expiry, hence than the new one:
  -- renewals only lengthen, and leave it.
  redis_call('hset', KEYS[1], ARGV[1], string_sub(field, 1, second) .. at_string)
end
-- The hash has an expiry (see semaphore.lua, lengthen).
redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
return 1
