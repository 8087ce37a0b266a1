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
-- back) it is the last plus one, written back by one more SET. The
-- comparison is of decimal strings, never Lua numbers, which are doubles;
-- the arithmetic is exact (a microsecond time is far below 2^53).
local fence_ttl_ms = '86400000' -- 24 hours; a string, which redis.call passes as it is (a number it prints with '%.17g')

-- Issues n tokens in a row, the first as above and each next one more, and
-- returns the first as a decimal string; the counter keeps the last. One
-- SET … GET when the clock is ahead and n is 1 (nothing converted), else
-- one more SET: two commands for a release that grants many readers at
-- once.
local function claim_tokens(key, n)
  local now = server_us()
  local last = redis_call('set', key, now, 'PX', fence_ttl_ms, 'GET')
  local first = now
  if last and (#last > #now or (#last == #now and last >= now)) then
    first = string_format('%d', last + 1)
  elseif n == 1 then
    return now
  end
  redis_call('set', key, string_format('%d', first + n - 1), 'PX', fence_ttl_ms)
  return first
end

-- Advances the counter at key by one token and returns it, a number (a
-- script's reply turns it into the exact integer).
local function next_token(key)
  return claim_tokens(key, 1) + 0
end

-- next_token's token as a decimal string, for a script that writes it
-- rather than returns it.
local function next_token_string(key)
  return claim_tokens(key, 1)
end

-- Issues n tokens at once (claim_tokens) and returns the first, a number.
local function next_tokens(key, n)
  return claim_tokens(key, n) + 0
end
