-- semaphore: a fragment, not a script: prepended, after time.lua,
-- fence.lua, gone.lua, wake.lua and queue.lua, to the semaphore's scripts.
--
-- A semaphore is these keys under its name's hash tag:
--   the lock (a hash): "size" -> the size its permits are held under,
--     "used" -> how many are held, each holder's owner id -> "n token
--     expiry" (its permits, its grant's fencing token and its expiry, a
--     server time in ms, which its watchdog pushes forward), "keep" -> a
--     server time (ms) before which the hash cannot expire (outlast), and
--     "due" -> a server time (ms) no later than any holder's expiry
--     (purge);
--   the queue (queue.lua), in arrival order, which waiters of the kinds
--     sharing the name share: a semaphore's waiter's record says the
--     permits it waits for (its grant, "permits" n, n in letters:
--     queue.lua, permit_letters).
-- Owner ids are "client:seq"; the hash's own fields are the four above
-- (own_fields).
-- "due" spares the common attempt and release a read of the holders'
-- expiries: while the clock is before it, no holding has expired. Once
-- it has passed, purge reads every holder (HGETALL), frees the dead and
-- moves due on to the first expiry left: a scan of the holders about
-- once per lease, or per waiter timeout while releases hand permits on
-- (a handed grant lasts until its waiter's deadline, and moves due back
-- to it), where a zset of the expiries would cost every grant and
-- release a command more.
-- The hash goes when the last permit is given back with nobody queued,
-- so that a semaphore nobody uses leaves no key but its fence, and the
-- next caller's size holds.

local size_field, used_field, keep_field, due_field = 'size', 'used', 'keep', 'due'
local own_fields = {size = true, used = true, keep = true, due = true}

-- Numbers go to redis.call as strings where that is free ('0', a
-- decimal string read or passed in), or printed with '%d': Redis's Lua
-- prints a number argument with '%.17g', a floating-point conversion that
-- costs more than most commands here. Decimal strings become numbers by
-- arithmetic (time.lua).

-- Extends the TTL of the semaphore's hash to at least ms milliseconds, in
-- one command: unlike the keys extend (time.lua) takes, it always has an
-- expiry, set by the script that creates it.
local function lengthen(key, ms)
  redis_call('pexpire', key, ms, 'GT')
end

-- Returns the permits, the token and the expiry (decimal strings) of a
-- holder's field, "n token expiry": cut at its spaces by plain finds,
-- cheaper than a pattern. The expiry is nil for a field "n token" that
-- earlier scripts wrote, which kept the holders' expiries in a zset of
-- their own (the lock's "readers" key; purge reads it for such a field).
-- Nothing at all for a value that is no holder's (no space).
local function holding(v)
  local space = string_find(v, ' ', 1, true)
  if not space then
    return nil
  end
  local second = string_find(v, ' ', space + 1, true)
  if not second then
    return string_sub(v, 1, space - 1), string_sub(v, space + 1), nil
  end
  return string_sub(v, 1, space - 1), string_sub(v, space + 1, second - 1), string_sub(v, second + 1)
end

-- Returns holding(v), owner's field in the hash, with its expiry a
-- number, and whether the field records it: for a field of earlier
-- scripts, the expiry is owner's score in legacy, their zset of the
-- holders' expiries, or nil when none is recorded there either.
local function holding_at(v, owner, legacy)
  local n, token, expiry = holding(v)
  local recorded = expiry ~= nil
  if token and not recorded then
    expiry = redis_call('zscore', legacy, owner)
  end
  return n, token, expiry and expiry + 0, recorded
end

-- Returns a holder's field: n permits (a decimal string) granted with
-- token until expiry (decimal strings).
local function holder_field(n, token, expiry)
  return n .. ' ' .. token .. ' ' .. expiry
end

-- The hash's writes of one script, deferred to its end (flush), so that
-- they cost one HDEL and one HSET however many waiters it serves: dels
-- and sets are flat field lists (field, value, … for sets), never naming
-- a field twice; keep is the hash's "keep" (server time, ms, before which
-- the hash cannot expire: the write of it made sure of that, and its
-- expiry is only ever lengthened), or nil when none is known, and moved
-- whether the script moved it on; due and due_moved the same of the
-- hash's "due" (purge).
local function writes(keep, due)
  return {dels = {}, sets = {}, keep = keep and keep + 0, moved = false, due = due and due + 0, due_moved = false}
end

-- The most fields one HDEL or HSET of flush names: unpack's limit is the
-- Lua stack's.
local writes_max = 1000

-- Writes w's pending fields to the hash lock, and forgets them.
local function flush(lock, w)
  if #w.dels > 0 then
    redis_call('hdel', lock, unpack_list(w.dels))
    w.dels = {}
  end
  if w.moved then
    w.sets[#w.sets + 1] = keep_field
    w.sets[#w.sets + 1] = string_format('%d', w.keep)
    w.moved = false
  end
  if w.due_moved then
    w.sets[#w.sets + 1] = due_field
    w.sets[#w.sets + 1] = string_format('%d', w.due)
    w.due_moved = false
  end
  if #w.sets > 0 then
    redis_call('hset', lock, unpack_list(w.sets))
    w.sets = {}
  end
end

-- Sets field to value in w, for flush.
local function write_field(lock, w, field, value)
  w.sets[#w.sets + 1] = field
  w.sets[#w.sets + 1] = value
  if #w.sets >= writes_max then
    flush(lock, w)
  end
end

-- Deletes field in w, for flush.
local function delete_field(lock, w, field)
  w.dels[#w.dels + 1] = field
  if #w.dels >= writes_max then
    flush(lock, w)
  end
end

-- Makes sure the hash lock outlives ms milliseconds from now. When w's
-- keep does not say so already, extends its expiry to twice ms, never
-- shortening it (callers may use different leases and waiter timeouts),
-- and moves keep on, so that the writes that follow within ms find keep
-- far enough and extend nothing.
local function outlast(lock, w, ms)
  ms = ms + 0
  if w.keep and w.keep >= server_ms() + ms then
    return
  end
  lengthen(lock, 2 * ms)
  w.keep, w.moved = server_ms() + 2 * ms, true
end

-- Moves w's due (purge) back to at, a holder's new expiry (server time,
-- ms), if at is earlier: no holder's expiry may come before due.
local function lower_due(w, at)
  if not w.due or at < w.due then
    w.due, w.due_moved = at, true
  end
end

-- Issues owner n permits (a decimal string) until ms milliseconds from
-- now (at and expiry, when not nil: that time, server time in ms, as a
-- number and as a decimal string), with a fencing token, which it returns
-- (a decimal string); writes owner's field and due through w. The caller
-- writes "used". fresh says the hash had no expiry to keep: a new
-- semaphore's first grant writes the hash at once (w's fields with it)
-- and sets its expiry.
local function grant(lock, fence, owner, n, ms, at, expiry, fresh, w)
  local token = next_token_string(fence)
  at = at or server_ms() + ms
  write_field(lock, w, owner, holder_field(n, token, expiry or string_format('%d', at)))
  if fresh then
    w.keep, w.moved = server_ms() + ms, true
    w.due, w.due_moved = at, true
    flush(lock, w)
    redis_call('pexpire', lock, ms)
    return token
  end
  lower_due(w, at)
  outlast(lock, w, ms)
  return token
end

-- Frees the permits of the holders whose expiry has passed (they died, or
-- were cut off from Redis for longer than their lease: their leases have
-- ended), and returns how many permits are still held and a server time
-- (ms) no later than the first expiry of the holders left, for wait_for
-- (false when none is held). gone, if not nil, is an owner whose field
-- the caller deletes already (a release): it is no holder left. legacy is
-- the zset where earlier scripts kept the holders' expiries: a field they
-- wrote ("n token") has its expiry there, or is alive and bounds nothing.
-- While the server's clock is before w's due (the hash's "due", no later
-- than any holder's expiry: every write of a holder's expiry keeps it
-- so, lower_due), nobody can be dead: purge reads nothing and returns
-- due. Otherwise it reads every field of the hash, frees the dead, if
-- any, and moves due on to the first expiry left, through w.
local function purge(lock, used, w, gone, legacy)
  if used == 0 then
    -- Nobody holds: due bounds no expiry, and the next grant sets it
    -- (lower_due), rather than keep one that may have passed.
    w.due = nil
    return 0, false
  end
  local now = server_ms()
  if w.due and w.due > now then
    return used, w.due
  end
  -- The permits of the live holders, counted anew: the fields are the
  -- holdings, and "used" only their sum, which this puts right if it
  -- ever drifted.
  local first, live = false, 0
  local all = redis_call('hgetall', lock)
  for i = 1, #all, 2 do
    local owner = all[i]
    if not own_fields[owner] and owner ~= gone then
      local n, _, expiry = holding_at(all[i + 1], owner, legacy)
      if not n then
        -- No holding (no holder's field).
      elseif expiry and expiry <= now then
        delete_field(lock, w, owner)
      else
        live = live + n
        -- A holding of earlier scripts with no expiry recorded is alive,
        -- and bounds nothing.
        if expiry and (not first or expiry < first) then
          first = expiry
        end
      end
    end
  end
  if not first then
    w.due = nil -- as with nobody holding, above
    return live, false
  end
  if first ~= w.due then
    w.due, w.due_moved = first, true
  end
  return live, first
end

-- Hands permits to the waiters at the head of the queue, in arrival
-- order, as many as fit in size with used held: each is granted for what
-- is left of its deadline (a granted waiter that died holds its permits no
-- longer than its waiter timeout) and woken with "owner token"; except
-- self, the caller's own owner, asking for self_n, which is granted for
-- its lease, self_ms milliseconds from now (the lease its reply grants
-- it), and whose reply says so. fresh says the hash had no expiry to
-- keep (grant): the first grant sets it.
-- Purges the dead waiters it meets (queue.lua, queue_head). Stops at the
-- first live waiter that does not fit, so that no waiter is overtaken by
-- later ones asking for fewer; one whose want is unknown (a record
-- without it), or larger than size (it asked under another size), or a
-- waiter of another kind sharing the name, is woken by name to ask again
-- with an attempt, which says. With every permit held, a semaphore's
-- waiter cannot fit whatever it wants, so it is not woken: the next
-- change, a release or a holder's expiry, serves the queue again, and
-- wakes it then if it must ask again. A release (self nil) stops there
-- without looking at the next waiter. self_n is a decimal string; a
-- waiter's want is its record's (queue.lua, waiter: permits).
-- The hash's writes go through w (writes), which the caller flushes.
-- Returns the permits held now, the live waiter left first (a queue.lua
-- waiter table, or nil: none, or, for a release, not looked for once
-- every permit is held), and self's token if self was granted.
local function serve(lock, fence, queue, size, used, pub, channel, self, self_n, self_ms, fresh, w)
  local now = server_ms()
  local mine
  while true do
    if used >= size and not self then
      return used, nil, mine
    end
    local head = queue_head(queue)
    if not head then
      return used, nil, mine
    end
    local n = self_n
    if head.owner ~= self then
      if head.grant == grant_permits and used >= size then
        return used, head, mine
      end
      n = head.grant == grant_permits and head.permits ~= '' and (string_gsub(head.permits, '%u', permit_digits))
    end
    local want = n and n + 0
    if not want or want > size then
      wake_owner(pub, channel, head.owner)
      return used, head, mine
    end
    if used + want > size then
      return used, head, mine
    end
    pop_head(queue)
    local ms, at, expiry = head.deadline - now, head.deadline, head.deadline_string
    if head.owner == self then
      ms, at, expiry = self_ms, nil, nil
    end
    local token = grant(lock, fence, head.owner, n, ms, at, expiry, fresh, w)
    fresh = false
    used = used + want
    if head.owner == self then
      mine = token
    else
      wake_owner(pub, channel, head.owner, head.owner .. ' ' .. token)
    end
  end
end

-- Writes how many permits are held (and the size, if not nil) with w's
-- other writes, or, with none held and nobody queued (head is the first
-- live waiter, or nil), deletes the semaphore's hash instead: it is
-- free, and the next caller's size holds.
local function settle(lock, used, head, size, w)
  if used == 0 and not head then
    redis_call('del', lock)
    return
  end
  write_field(lock, w, used_field, string_format('%d', used))
  if size then
    write_field(lock, w, size_field, string_format('%d', size))
  end
  flush(lock, w)
end

-- How long, in milliseconds, a waiter that was not granted may sleep:
-- until the first holder's expiry (its permits come back without a
-- wake-up if it died), and, when another waiter, head, is first, no later
-- than its deadline (it is purged then if it died). Granted permits come
-- with a wake-up by name. earliest is no later than the first holder's
-- expiry (purge), or false: nobody holds.
local function wait_for(owner, head, earliest)
  local now = server_ms()
  local wait = -1
  if earliest then
    wait = math_max(earliest - now, 0)
  end
  if head and head.owner ~= owner then
    local left = math_max(head.deadline - now, 0)
    if wait < 0 or left < wait then
      wait = left
    end
  end
  return wait
end

-- The error a caller giving another size than the permits held gets; the
-- client reads its code (luascripts.InvalidCode) as relock.ErrInvalid.
local function size_conflict(size, stored)
  return redis.error_reply('RELOCKINVALID semaphore size ' .. size .. ' differs from the size ' .. stored .. ' its permits are held under')
end
