-- fence_raise: raise a lock's fencing counter to at least a token issued
-- on other servers. Redlock writes a grant's token (the largest its
-- majority issued) back to that majority, so that any later majority, which
-- shares a server with it, issues a larger one. Runs after time.lua and fence.lua.
--
-- KEYS[1]  the fence counter
-- ARGV[1]  token
--
-- Returns the counter after the call.
local token = tonumber(ARGV[1])
if tonumber(redis_call('get', KEYS[1]) or '0') < token then
  redis_call('set', KEYS[1], ARGV[1])
end
redis_call('pexpire', KEYS[1], fence_ttl_ms)
return tonumber(redis_call('get', KEYS[1]))
