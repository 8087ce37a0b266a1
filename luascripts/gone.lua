-- gone: a fragment, not a script: prepended to every acquire and release
-- script, after time.lua.
--
-- The gone zset (KEYS "gone": owner id -> server time in ms until which the
-- owner is gone) records owners whose caller gave up on an acquire that got
-- no reply. That acquire may still be on its way to Redis, on another
-- pipelined connection, and land after the release that cleaned up for it:
-- recorded here, it is refused when it lands, instead of leaving a holder,
-- a queue entry or a waiting writer that nobody renews or withdraws.

-- Reports whether owner is recorded in key as gone. One ZSCORE of a key
-- that is usually absent: the uncontended acquire pays nothing more.
local function is_gone(key, owner)
  local score = redis_call('zscore', key, owner)
  if not score then
    return false
  end
  return tonumber(score) > server_ms()
end

-- Records owner in key as gone for ms milliseconds when ms > 0 (a release
-- that abandons an acquire with no reply); does nothing for ms "0" (a normal
-- release). Trims the entries that ended, and extends the key's TTL to ms,
-- never shortening it: other owners' entries may need it longer.
local function record_gone(key, owner, ms)
  if ms == '0' then
    return -- the common case, a normal release: no number to convert
  end
  ms = tonumber(ms)
  if not ms or ms <= 0 then
    return
  end
  local now = server_ms()
  redis_call('zremrangebyscore', key, '-inf', now)
  redis_call('zadd', key, now + ms, owner)
  extend(key, ms)
end

