-- semaphore_renew: extend a holding of a semaphore's permits, if it is
-- still held, to at least the given length from now; never shortens it
-- (an explicit extension may have made it longer). A holding whose expiry
-- has passed is not revived: its permits may have gone to others. Runs
-- after time.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua)
-- KEYS[2]  the holders' expiries (zset: owner id -> server time, ms)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds its permits.
local expiry = redis_call('zscore', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) <= server_ms() then
  return 0
end
redis_call('zadd', KEYS[2], 'GT', server_ms() + tonumber(ARGV[2]), ARGV[1])
-- Both keys have an expiry (see semaphore.lua, lengthen).
redis_call('pexpire', KEYS[2], ARGV[2], 'GT')
redis_call('pexpire', KEYS[1], ARGV[2], 'GT')
return 1
