-- semaphore_renew: extend a holding of a semaphore's permits, if it is
-- still held, to at least the given length from now; never shortens it
-- (an explicit extension may have made it longer). A holding whose expiry
-- has passed is not revived: its permits may have gone to others. Runs
-- after time.lua, fence.lua, gone.lua, wake.lua, queue.lua and
-- semaphore.lua (whose holding_at and holder_field read and write the
-- holder's field).
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
local v = redis_pcall('hmget', KEYS[1], ARGV[1], due_field)
if v.err or not v[1] then
  return 0
end
local n, token, expiry, recorded = holding_at(v[1], ARGV[1], KEYS[2])
if not n then
  return 0 -- no semaphore's holding (another kind's field)
end
local now = server_ms()
local at = now + ARGV[2]
if expiry and expiry <= now then
  return 0
end
if not recorded and expiry and expiry > at then
  at = expiry -- never shorter than the expiry earlier scripts recorded
end
local at_string = string_format('%d', at)
if not recorded then
  -- The field's first expiry (a field of earlier scripts, "n token"):
  -- due (semaphore.lua, purge) may be later, and must come no later.
  if v[2] and at < v[2] + 0 then
    redis_call('hset', KEYS[1], ARGV[1], holder_field(n, token, at_string), due_field, at_string)
  else
    redis_call('hset', KEYS[1], ARGV[1], holder_field(n, token, at_string))
  end
elseif at > expiry then
  -- Due is no later than the old expiry, hence than the new one:
  -- renewals only lengthen, and leave it.
  redis_call('hset', KEYS[1], ARGV[1], holder_field(n, token, at_string))
end
-- The hash has an expiry (see semaphore.lua, lengthen).
redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
return 1
