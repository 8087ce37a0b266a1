-- fence: a fragment, not a script: prepended, after time.lua, to every
-- acquire script.
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
-- A token is the server time in microseconds whenever that is above the
-- last one: one SET … GET, which writes it and returns the last, the common
-- case. Otherwise (more than one grant in a microsecond, or a clock stepped
-- back) it is the last plus one: the last is written back and INCR
-- advances it. The comparison is of decimal strings, never Lua numbers,
-- which are doubles; the token returned is one (a microsecond time is far
-- below 2^53, so Redis turns it into the exact integer).
local fence_ttl_ms = '86400000' -- 24 hours; a string, which redis.call passes as it is (a number it prints with '%.17g')

local function next_token(key)
  local now = server_us()
  local last = redis_call('set', key, now, 'PX', fence_ttl_ms, 'GET')
  if last and (#last > #now or (#last == #now and last >= now)) then
    redis_call('set', key, last, 'PX', fence_ttl_ms)
    return redis_call('incr', key)
  end
  return tonumber(now)
end

-- next_token's token as a decimal string, for a script that writes it
-- rather than returns it: the common case converts nothing.
local function next_token_string(key)
  local now = server_us()
  local last = redis_call('set', key, now, 'PX', fence_ttl_ms, 'GET')
  if last and (#last > #now or (#last == #now and last >= now)) then
    redis_call('set', key, last, 'PX', fence_ttl_ms)
    return string_format('%d', redis_call('incr', key))
  end
  return now
end

-- Issues n tokens at once, next_token's n in a row: the first is
-- max(last + 1, server TIME in microseconds), each next one more, and the
-- counter keeps the last. Returns the first, a number. One SET … GET, and
-- a SET of the last when there is more than one or the clock was not
-- ahead: two commands for a release that grants many readers at once.
local function next_tokens(key, n)
  local now = server_us()
  local last = redis_call('set', key, now, 'PX', fence_ttl_ms, 'GET')
  local first = tonumber(now)
  if last and (#last > #now or (#last == #now and last >= now)) then
    first = tonumber(last) + 1
  end
  if n > 1 or first ~= tonumber(now) then
    redis_call('set', key, string_format('%d', first + n - 1), 'PX', fence_ttl_ms)
  end
  return first
end
