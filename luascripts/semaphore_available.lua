-- semaphore_available: how many permits of a semaphore are free now.
-- Frees the permits of holders whose lease expired, handing them to the
-- waiters queued as a release does. Runs after time.lua, fence.lua,
-- gone.lua, wake.lua, queue.lua and semaphore.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua)
-- KEYS[2]  the fence counter
-- KEYS[3]  the queue (zset; see queue.lua)
-- KEYS[4]  the holders' expiries that earlier scripts kept (zset: owner
--          id -> server time, ms; semaphore.lua, purge)
-- KEYS[5]  unused (gone)
-- ARGV[1]  wake-up channel
-- ARGV[2]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[3]  size
--
-- Returns size minus the permits held. Fails with a RELOCKINVALID error
-- when permits are held under another size; returns 0 when another kind's
-- lock has the name.
local lock, fence, queue, legacy = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local size = tonumber(ARGV[3])
local v = redis_pcall('hmget', lock, size_field, used_field, keep_field, due_field)
if v.err then
  return 0
end
if not v[1] then
  return redis_call('exists', lock) == 1 and 0 or size
end
local held = tonumber(v[2]) or 0
local w = writes(v[3], v[4])
local used = purge(lock, held, w, nil, legacy)
if used > 0 and tonumber(v[1]) ~= size then
  -- What purge freed stays freed.
  if used ~= held then
    write_field(lock, w, used_field, string_format('%d', used))
  end
  flush(lock, w)
  return size_conflict(size, v[1])
end
if used ~= held then
  local head
  used, head = serve(lock, fence, queue, tonumber(v[1]), used, ARGV[2], ARGV[1], nil, nil, nil, false, w)
  settle(lock, used, head, nil, w)
else
  flush(lock, w) -- due, moved on by purge
end
return size - used
