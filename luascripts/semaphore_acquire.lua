-- semaphore_acquire: take n permits of a semaphore for a new owner if
-- they fit and nobody waits ahead of it; otherwise queue the owner (Lock)
-- or not (TryLock). Runs after time.lua, fence.lua, gone.lua, wake.lua,
-- queue.lua and semaphore.lua.
--
-- KEYS[1]  the lock (hash; see semaphore.lua)
-- KEYS[2]  the fence counter
-- KEYS[3]  the queue (zset: the waiters in arrival order; see queue.lua)
-- KEYS[4]  the holders' expiries that earlier scripts kept (zset: owner
--          id -> server time, ms; semaphore.lua, purge)
-- KEYS[5]  the gone owners (zset: owner id -> server time, ms; see gone.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
-- ARGV[3]  "0" not to queue the owner when not granted (TryLock); else
--          queue it (a waiter queues from its first attempt)
-- ARGV[4]  waiter timeout, milliseconds
-- ARGV[5]  wake-up channel
-- ARGV[6]  publish command: "publish", or "spublish" in cluster mode
-- ARGV[7]  unused
-- ARGV[8]  unused (first attempt)
-- ARGV[9]  permits wanted, n: 1 <= n <= size
-- ARGV[10] size
--
-- Permits freed since the last release (holders whose lease expired) go
-- first to the waiters queued, in order, before this attempt's owner.
-- A release hands permits to queued waiters (semaphore.lua, serve), whose
-- Acquire holds them on the wake-up; an attempt of such a waiter takes
-- the grant up instead (its lease, {1, token}).
--
-- Returns {1, token} when granted. Returns {0, wait, queued[, now]} when
-- not (queue.lua, queued_reply), where wait is how long in milliseconds
-- nothing changes without a wake-up (see wait_for); {0, -1} for an owner
-- recorded as gone, which is neither granted nor queued (its caller gave
-- up before this attempt landed). Fails with a RELOCKINVALID error when
-- permits are held under another size.
local lock, fence, queue, legacy, gone = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, ms, pub, channel = ARGV[1], ARGV[2] + 0, ARGV[6], ARGV[5]
local n, size = ARGV[9] + 0, ARGV[10] + 0

-- One EXISTS names gone once, queue twice and the lock four times, and
-- counts each key as often as it is named, so its reply says which of
-- the three exist, in binary. Nobody gone, nobody queued and no semaphore
-- (the uncontended case) costs that EXISTS alone: fresh, with nothing to
-- read.
local seen = redis_call('exists', gone, queue, queue, lock, lock, lock, lock)
if seen == 0 and n <= size then
  -- Nothing gone, queued or held: a fresh semaphore, whose first grant
  -- writes the hash whole (what grant, below, writes for it through w:
  -- the permits held, the size, the holder's field and keep, and due:
  -- the holder's expiry), and sets its expiry.
  local token = next_token_string(fence)
  local expiry = string_format('%d', server_ms() + ms)
  redis_call('hset', lock, used_field, ARGV[9], size_field, ARGV[10], owner, holder_field(ARGV[9], token, expiry),
    keep_field, expiry, due_field, expiry)
  redis_call('pexpire', lock, ARGV[2])
  return {1, token + 0}
end
local queued_any = seen % 4 >= 2
local v, fresh = {}, true
if seen > 0 then
  v = redis_pcall('hmget', lock, size_field, used_field, owner, keep_field, due_field)
  if v.err then
    -- Another kind's lock (a string) has the name: wait for its expiry
    -- (-1: none, -2: gone already, as the reply codes say).
    return {0, redis_call('pttl', lock)}
  end
  if v[1] then
    fresh = false
  elseif seen >= 4 then
    -- Another kind's lock (a hash without a size) has the name.
    return {0, redis_call('pttl', lock)}
  end
  if seen % 2 == 1 and is_gone(gone, owner) then
    return {0, -1}
  end
end
local held_n, token, expiry
if v[3] then
  held_n, token, expiry = holding_at(v[3], owner, legacy)
end
if token and (not expiry or expiry > server_ms()) then
  -- A release handed permits to this owner, a queued waiter: its lease
  -- from now on. (A grant that expired is purged below; one that
  -- earlier scripts recorded without its expiry is taken up.)
  local at = server_ms() + ms
  local at_string = string_format('%d', at)
  if v[5] and at < v[5] + 0 then
    -- The lease ends before the grant would have: due comes no later.
    redis_call('hset', lock, owner, holder_field(held_n, token, at_string), due_field, at_string)
  else
    redis_call('hset', lock, owner, holder_field(held_n, token, at_string))
  end
  lengthen(lock, ms)
  if expiry and expiry > at then
    -- The first waiter may be sleeping until the grant's expiry.
    wake_head(queue, pub, channel)
  end
  return {1, token + 0}
end
local w = writes(v[4], v[5])
local stored = (v[2] or 0) + 0
local used, earliest = purge(lock, stored, w, nil, legacy)
local resize = nil
if (v[1] and v[1] + 0) ~= size then
  if used > 0 then
    -- What purge freed stays freed.
    if used ~= stored then
      write_field(lock, w, used_field, string_format('%d', used))
    end
    flush(lock, w)
    return size_conflict(size, v[1])
  end
  resize = size
end
-- head is the first live waiter when serve looked; with every permit
-- held it does not: no waiter fits, so nobody is served and no dead
-- waiter needs purging before the next release or expiry, which serves
-- the queue (semaphore.lua, serve). The attempt then queues behind the
-- waiters unread (queue.lua, unread_head), and sleeps until the first
-- holder's expiry (no later: due, see purge).
local head, mine
local saturated = queued_any and used >= size
if queued_any and not saturated then
  local held = used
  used, head, mine = serve(lock, fence, queue, size, used, pub, channel, owner, ARGV[9], ms, fresh, w)
  if used ~= held then
    -- Granted to waiters: the first holder's expiry may have moved back
    -- to a grant's, which due followed (grant), and the hash has an
    -- expiry now.
    earliest = w.due
    fresh = false
  end
end
if mine then
  settle(lock, used, head, resize, w)
  return {1, mine + 0}
end
if not head and used + n <= size then
  write_field(lock, w, used_field, string_format('%d', used + n))
  if resize then
    write_field(lock, w, size_field, ARGV[10])
  end
  local token = grant(lock, fence, owner, ARGV[9], ms, nil, nil, fresh, w)
  flush(lock, w)
  return {1, token + 0}
end

local queued = 0
if ARGV[3] ~= '0' then
  queued = 1
  enqueue(queue, owner, ARGV[4], head or (saturated and unread_head or nil), grant_permits .. string_gsub(ARGV[9], '%d', permit_letters))
  if used ~= stored or resize then
    write_field(lock, w, used_field, string_format('%d', used))
    write_field(lock, w, size_field, ARGV[10])
  end
  if fresh then
    flush(lock, w)
    redis_call('pexpire', lock, ARGV[4])
  else
    outlast(lock, w, ARGV[4])
    flush(lock, w)
  end
elseif fresh then
  -- No semaphore, nothing granted, and a TryLock leaves nobody queued:
  -- nothing to write (a hash written now would have no expiry).
elseif used ~= stored or resize then
  settle(lock, used, head, resize, w)
else
  -- Waiters granted (serve) as many permits as expired holders freed.
  flush(lock, w)
end
return queued_reply(wait_for(owner, head, earliest), queued)
