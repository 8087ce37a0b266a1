-- time: a fragment, not a script: prepended to every script that reads the
-- server clock or sets the expiry of a key that several owners share.

-- redis.call and redis.pcall, the string functions the scripts use,
-- math.max and unpack, as locals: a function of the library finds a
-- global through the globals' metatable (Redis gives a library's code at
-- load time other globals than at run time), which costs several table
-- lookups at every use; a local, none. None of them is there when the
-- library loads (a library's code may only register functions then), so
-- new_call takes them, at the first call: they stay the same functions
-- for as long as the library is loaded.
local redis_call, redis_pcall
local string_byte, string_find, string_format, string_gsub, string_match, string_sub
local math_max, unpack_list

-- Returns the server's TIME in milliseconds. Deadlines stored in Redis use
-- it, never a client's clock. A script reads the clock once: it runs for
-- microseconds, and the fragments it is made of ask for the time several
-- times.
local server_time
local time_ms

-- Starts a call: takes the functions above if not taken yet, and forgets
-- the clock read by the call before. Every script calls it first: a
-- function of the library (functions.go), whose fragments are defined
-- once for every call, and a script run by EVAL (luascripts.go, load),
-- which starts afresh.
local function new_call()
  if not redis_call then
    redis_call, redis_pcall = redis.call, redis.pcall
    string_byte, string_find, string_format, string_gsub, string_match, string_sub =
      string.byte, string.find, string.format, string.gsub, string.match, string.sub
    math_max, unpack_list = math.max, unpack
  end
  server_time = nil
  time_ms = nil
end

local function server_clock()
  if not server_time then
    server_time = redis_call('time')
  end
  return server_time
end

-- Decimal strings (TIME's, a reply's, an ARGV's) become numbers by
-- arithmetic, "s + 0": one conversion, where tonumber(s) converts twice
-- (it checks, then converts), each a strtod that costs more than most
-- commands' own work here.
local function server_ms()
  if not time_ms then
    local t = server_clock()
    local us = t[2] + 0
    time_ms = t[1] * 1000 + (us - us % 1000) / 1000
  end
  return time_ms
end

-- Returns the server's TIME in microseconds, as a decimal string: the
-- seconds, and the microseconds padded to six digits (no number is
-- converted).
local function server_us()
  local t = server_clock()
  return t[1] .. string_sub('00000' .. t[2], -6)
end

-- Returns the server's TIME in milliseconds (server_ms's), as a decimal
-- string (no number is converted).
local function server_ms_string()
  local t = server_clock()
  return t[1] .. string_sub('00000' .. t[2], -6, -4)
end

-- Extends key's TTL to at least ms milliseconds; never shortens it. Keys
-- that several owners share (the queue, the waiters' and readers' deadlines,
-- the gone owners, a lock's hash) must outlive the latest deadline any of
-- them holds, and callers may use different leases and waiter timeouts: a
-- caller with a short one must not make the key expire under another's
-- longer deadline. A key without expiry (pttl -1) gets one; an absent key
-- (pttl -2) stays absent. One command when the expiry moves on, the common
-- case (PEXPIRE GT takes a key without expiry for one that never expires).
local function extend(key, ms)
  if redis_call('pexpire', key, ms, 'GT') == 0 and redis_call('pttl', key) == -1 then
    redis_call('pexpire', key, ms)
  end
end
