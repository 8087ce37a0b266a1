-- fence: a fragment, not a script: prepended to every acquire script.
-- Defines next_token(key), which advances the fencing counter at key to
-- max(last + 1, server TIME in microseconds) and returns the new token, so
-- tokens keep increasing even after Redis forgot the counter (a restart
-- without persistence, a failover to a replica that had not seen it).
--
-- The counter expires fence_ttl_ms (24 hours) after the lock's last grant,
-- so that per-entity locks ("invoice:N") do not leave a key per name behind
-- forever. Forgetting it is harmless, for the same reason a restart is: the
-- counter is ahead of the server clock only by the grants issued faster than
-- one per microsecond, which a day of clock time overtakes many times over,
-- so the first token after expiry (the server time) is still above every
-- token issued before. Only a server clock stepped back by more than the
-- expiry could break that, and it would break the restart case alike.
--
-- The arithmetic stays in Redis integers (INCR; SET of a decimal string):
-- Lua numbers are doubles and print in exponent form past 14 digits.
local fence_ttl_ms = 24 * 60 * 60 * 1000

local function next_token(key)
  local token = redis.call('incr', key)
  local t = redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  if token < tonumber(now) then
    redis.call('set', key, now)
    token = tonumber(now)
  end
  redis.call('pexpire', key, fence_ttl_ms)
  return token
end
