-- semaphore_renew: extend a holding of a semaphore's permits, if it is
-- still held, to at least the given length from now; never shortens it
-- (an explicit extension may have made it longer). A holding whose expiry
-- has passed is not revived: its permits may have gone to others. Runs
-- after time.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua: the holder's field is
--          "n token expiry")
-- KEYS[2]  unused (the holders' expiries are in the lock's hash)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds its permits.
local v = redis_pcall('hget', KEYS[1], ARGV[1])
if not v or v.err then
  return 0
end
local now = server_ms()
local at = now + ARGV[2]
-- The field's expiry follows its second space (semaphore.lua, holding);
-- a field of earlier scripts, "n token", records none, and gets one.
local second = string_find(v, ' ', string_find(v, ' ', 1, true) + 1, true)
local expiry = second and string_sub(v, second + 1) + 0
if expiry and expiry <= now then
  return 0
end
if not expiry then
  redis_call('hset', KEYS[1], ARGV[1], v .. ' ' .. string_format('%d', at))
elseif at > expiry then
  -- Due (semaphore.lua, purge) is no later than the old expiry, hence
  -- than the new one: renewals only lengthen, and leave it.
  redis_call('hset', KEYS[1], ARGV[1], string_sub(v, 1, second) .. string_format('%d', at))
end
-- The hash has an expiry (see semaphore.lua, lengthen).
redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
return 1
