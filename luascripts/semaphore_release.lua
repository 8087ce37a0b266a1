-- semaphore_release: give back an owner's permits, handing them to the
-- waiters at the head of the queue that now fit; for an owner that holds
-- none, leave the queue instead (a waiter giving up), which may let the
-- waiters behind it in. Runs after time.lua, fence.lua, gone.lua, wake.lua,
-- queue.lua and semaphore.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua)
-- KEYS[2]  the queue (zset; see queue.lua)
-- KEYS[3]  the holders' expiries that earlier scripts kept (zset: owner
--          id -> server time, ms; semaphore.lua, purge)
-- KEYS[4]  the gone owners (zset; see gone.lua)
-- KEYS[5]  the fence counter (the tokens of handed-on grants)
-- ARGV[1]  owner id
-- ARGV[2]  wake-up channel
-- ARGV[3]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[4]  unused: a holding is never re-entered, so a release ends it
-- ARGV[5]  gone, milliseconds: "0" for a normal release; n > 0 also records
--          the owner as gone for n ms (see gone.lua)
--
-- Each waiter granted is woken by name with "owner token"; nobody else is
-- woken.
--
-- Returns 1 when released, 0 when the owner held no permits.
local lock, queue, legacy, gone, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, channel, pub = ARGV[1], ARGV[2], ARGV[3]
record_gone(gone, owner, ARGV[5]) -- the script is atomic: order is free
local v = redis_pcall('hmget', lock, owner, size_field, used_field, keep_field, due_field)
if v.err then
  -- Another kind's lock (a string) has the name.
  return 0
end
local used = (v[3] or 0) + 0
local released = 0
local w
if v[1] then
  used = used - (holding(v[1]) or 0)
  released = 1
  if used == 0 and redis_call('exists', queue) == 0 then
    -- The last permit back, nobody queued: the common case, one DEL.
    redis_call('del', lock)
    return released
  end
  w = writes(v[4], v[5])
  delete_field(lock, w, owner)
elseif not dequeue(queue, owner) then
  return 0
else
  w = writes(v[4], v[5])
end
if not v[2] then
  -- The hash expired under the waiter (nothing held): nothing to hand on.
  flush(lock, w)
  return released
end
used = purge(lock, used, w, owner, legacy)
local head
used, head = serve(lock, fence, queue, v[2] + 0, used, pub, channel, nil, nil, nil, false, w)
settle(lock, used, head, nil, w)
return released
