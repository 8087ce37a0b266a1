-- fence: a fragment, not a script: prepended to every acquire script.
-- Defines next_token(key), which advances the fencing counter at key to
-- max(last + 1, server TIME in microseconds) and returns the new token, so
-- tokens keep increasing even after Redis forgot the counter (a restart
-- without persistence, a failover to a replica that had not seen it).
--
-- The arithmetic stays in Redis integers (INCR; SET of a decimal string):
-- Lua numbers are doubles and print in exponent form past 14 digits.
local function next_token(key)
  local token = redis.call('incr', key)
  local t = redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  if token < tonumber(now) then
    redis.call('set', key, now)
    token = tonumber(now)
  end
  return token
end
