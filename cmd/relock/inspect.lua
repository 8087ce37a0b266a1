-- inspect: read every key of one lock at one moment, with the server's
-- clock, without changing anything. Works on any kind: it reports what it
-- finds and leaves the interpretation to the caller.
--
-- KEYS[1]  the lock (string: owner id; or hash: owner id -> hold count,
--          plus field "mode" for a read-write lock)
-- KEYS[2]  the fence counter (string: last token issued)
-- KEYS[3]  the queue (zset of waiters' pairs in arrival order; see
--          luascripts/queue.lua)
-- KEYS[4]  the readers' deadlines (zset: owner id -> server time, ms)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms)
-- ARGV[1]  most entries to return of each hash, list and zset; 0 returns
--          their sizes only (strings are always returned)
--
-- Returns {now, lock, fence, queue, readers, gone, semaphore}: now is
-- the server TIME in milliseconds; semaphore is the lock as a semaphore
-- (inspect_semaphore.lua) or false; each key is {type, pttl, size,
-- entries, mode}:
--   type     TYPE of the key ("none" when absent)
--   pttl     PTTL of the key: -2 absent, -1 no expiry
--   size     elements: 1 for a string, HLEN or ZCARD; the queue's
--            waiters (half its ZCARD); -1 for another type
--   entries  flat: a string's value; a hash's field, value pairs except
--            "mode"; a zset's member, score pairs by score; the queue's
--            members in arrival order (owner id, record pairs)
--   mode     a hash's "mode" field, or false
-- Entries are cut at ARGV[1] (pairs for pairs); size tells the whole.

local limit = tonumber(ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function describe(key, queue)
  local kind = redis.call('type', key).ok
  local pttl = redis.call('pttl', key)
  local size, entries, mode = -1, {}, false
  if kind == 'string' then
    size = 1
    entries = {redis.call('get', key)}
  elseif kind == 'hash' then
    size = redis.call('hlen', key)
    mode = redis.call('hget', key, 'mode')
    if limit > 0 then
      local all = redis.call('hgetall', key)
      for i = 1, #all, 2 do
        if all[i] ~= 'mode' and #entries < 2 * limit then
          entries[#entries + 1] = all[i]
          entries[#entries + 1] = all[i + 1]
        end
      end
    end
  elseif kind == 'zset' and queue then
    size = math.floor(redis.call('zcard', key) / 2)
    if limit > 0 then
      entries = redis.call('zrange', key, 0, 2 * limit - 1)
    end
  elseif kind == 'zset' then
    size = redis.call('zcard', key)
    if limit > 0 then
      entries = redis.call('zrange', key, 0, limit - 1, 'WITHSCORES')
    end
  end
  return {kind, pttl, size, entries, mode}
end

return {
  now,
  describe(KEYS[1]),
  describe(KEYS[2]),
  describe(KEYS[3], true),
  describe(KEYS[4]),
  describe(KEYS[5]),
  semaphore_of(KEYS[1], limit),
}
