-- mutex_acquire: take a plain mutex if it is free, and issue its fencing token.
--
-- KEYS[1]  the lock (string: owner id)
-- KEYS[2]  the fence counter (string: last token issued)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns {1, token} when acquired, where token = max(last + 1, server TIME in
-- microseconds), so tokens keep increasing even after Redis forgot the counter.
-- Returns {0, pttl} when held by another owner: the holder's remaining time to
-- live in milliseconds (-1 when the key has no expiry).
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('pttl', KEYS[1])}
end
-- Token arithmetic stays in Redis integers (INCR, SET of a decimal string):
-- Lua numbers are doubles and print in exponent form past 14 digits.
local token = redis.call('incr', KEYS[2])
local t = redis.call('time')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
if token < tonumber(now) then
  redis.call('set', KEYS[2], now)
  token = tonumber(now)
end
return {1, token}
