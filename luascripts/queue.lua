-- queue: a fragment, not a script: prepended, after time.lua, fence.lua
-- and wake.lua, to the scripts of the kinds whose waiters take places in
-- a queue: the fair lock (every waiter, from its first attempt), the
-- read-write lock's writers, the semaphore, and the mutex and reentrant
-- lock (a waiter that has waited long enough to be starving, and every
-- waiter behind it; see internal/kind.Spec.QueueAfter). Kinds sharing a
-- name share its queue.
--
-- The queue is one zset (KEYS "queue") in arrival order. Each waiter is
-- two members with the same score, its arrival (server time in µs, above
-- every arrival before it, so that scores are unique): its owner id, by
-- which it is found, and its record, "owner deadline keep grant":
--   deadline  server time (ms) until which the waiter is alive; its
--             attempts and heartbeats push it on;
--   keep      server time (ms) before which the key cannot expire (a
--             bound the write of the record made sure of);
--   grant     what a hand-over makes the lock for it (grant_* below),
--             small letters; a semaphore's waiter's is followed by the
--             permits it waits for, so that a release reads a waiter's
--             want with the waiter, in decimal with the capitals A-J for
--             the digits ("permitsD": 3; permit_letters).
-- Owner ids hold no space, so the owner id sorts right before its record
-- and nothing sorts between them: the first waiter is the queue's first
-- two members, read by one ZRANGE and taken by one ZPOPMIN.
--
-- A waiter whose deadline passes (it died, or cannot reach Redis) is
-- purged when it comes first (queue_head). The key expires when every
-- deadline in it has passed: its expiry is only ever extended, to twice
-- the waiter timeout of the write that extends it, so that the waiters
-- that queue behind a live one within its timeout write no expiry.

-- What a hand-over grants the waiter (a record's grant): the kinds sharing
-- a name hold it differently.
local grant_string = 'string' -- the mutex: a string holding the owner id
local grant_hash = 'hash' -- the reentrant and fair lock, a read-write lock's writer: a hash owner id -> 1
local grant_permits = 'permits' -- the semaphore's waiter: its own holder records (semaphore.lua), for the permits after it

-- A semaphore's waiter's want is written in letters, so that a record's
-- grant is letters alone, as every version of these scripts reads it:
-- during a rolling deploy, one that reads a grant as small letters only
-- takes "permitsD" for a grant it cannot make, and wakes the waiter by
-- name to try (hand_on; an earlier semaphore's serve), rather than
-- purging a record it could not read. permit_letters writes a decimal
-- string so, permit_digits reads it back.
local permit_letters = {['0'] = 'A', ['1'] = 'B', ['2'] = 'C', ['3'] = 'D', ['4'] = 'E',
  ['5'] = 'F', ['6'] = 'G', ['7'] = 'H', ['8'] = 'I', ['9'] = 'J'}
local permit_digits = {A = '0', B = '1', C = '2', D = '3', E = '4', F = '5', G = '6', H = '7', I = '8', J = '9'}

-- Numbers go to redis.call as strings where that is free ('0'), and are
-- printed with '%d' (exact for integers below 2^53, as these are): a
-- number argument is printed with '%.17g', and '%.0f' is no cheaper, a
-- floating-point conversion that costs more than most commands here.

-- Returns the record of owner; grant is the record's grant, the permits
-- of a semaphore's waiter included.
local function waiter_record(owner, deadline, keep, grant)
  return owner .. ' ' .. string_format('%d %d ', deadline, keep) .. grant
end

-- Returns the waiter whose owner id and record are owner and record and
-- whose arrival is arrival (its score, or nil when not read: see
-- arrival_of), as a table {owner, deadline, deadline_string, keep,
-- grant, permits, arrival, record}, deadline_string and keep decimal
-- strings (what the record says: no number to print again), grant the
-- record's small letters (grant_*) and permits the capitals after them (a
-- semaphore's waiter's want, see permit_letters; '' for the other kinds); nil when
-- record is not owner's (a key not written by these scripts). The record
-- is read in place: no piece of it is copied but the captures.
local function waiter(owner, record, arrival)
  local at = #owner + 1
  if not record or string_byte(record, at) ~= 32 or string_sub(record, 1, #owner) ~= owner then
    return nil
  end
  local deadline, keep, grant, permits = string_match(record, '^(%d+) (%d+) (%l+)(%u*)$', at + 1)
  if not deadline then
    return nil
  end
  return {owner = owner, deadline = deadline + 0, deadline_string = deadline, keep = keep, grant = grant,
    permits = permits, arrival = arrival, record = record}
end

-- Returns the arrival (score) of w, a waiter of queue.
local function arrival_of(queue, w)
  return w.arrival or redis_call('zscore', queue, w.owner)
end

-- Returns the first waiter of queue whose deadline has not passed (a
-- waiter table, see waiter), or nil, purging the waiters before it, whose
-- deadline has passed, and whether it purged any; calls purged(owner), if
-- not nil, for each. An absent queue costs one ZRANGE. The ZRANGE reads
-- no score: Redis prints a score with '%.17g', which costs more than the
-- ZRANGE, and the arrival is needed only to move the waiter (arrival_of).
local function queue_head(queue, purged)
  local any = false
  while true do
    local first = redis_call('zrange', queue, '0', '1')
    if not first[1] then
      return nil, any
    end
    local w = waiter(first[1], first[2])
    if w and w.deadline > server_ms() then
      return w, any
    end
    -- Dead (its deadline passed), or no waiter's pair.
    redis_call('zremrangebyrank', queue, '0', w and '1' or '0')
    any = true
    if w and purged then
      purged(w.owner)
    end
  end
end

-- Returns owner's place in queue (a waiter table), or nil when it is not
-- queued.
local function find_waiter(queue, owner)
  local arrival = redis_call('zscore', queue, owner)
  if not arrival then
    return nil
  end
  local pair = redis_call('zrange', queue, arrival, arrival, 'BYSCORE')
  return waiter(owner, pair[2], arrival)
end

-- Makes sure the queue outlives a deadline ms milliseconds from now, given
-- keep, a time before which it cannot expire (0: none known), and returns
-- the new such time; fresh says the key was just made, without expiry.
-- Extends the expiry to twice ms, so that the waiters that follow within
-- ms find it long enough and write none. Never shortens it: waiters may
-- have different timeouts.
local function outlive(queue, ms, keep, fresh)
  local deadline = server_ms() + ms
  if keep >= deadline then
    return keep
  end
  if fresh then
    redis_call('pexpire', queue, 2 * ms)
  else
    redis_call('pexpire', queue, 2 * ms, 'GT')
  end
  return server_ms() + 2 * ms
end

-- Moves the deadline of w, a waiter of queue, to ms milliseconds from now.
local function renew_waiter(queue, w, ms)
  ms = ms + 0
  local keep = outlive(queue, ms, w.keep + 0, false)
  local arrival = arrival_of(queue, w)
  redis_call('zrem', queue, w.record)
  redis_call('zadd', queue, arrival, waiter_record(w.owner, server_ms() + ms, keep, w.grant .. w.permits))
end

-- Looks at the lock and its queue before an acquire attempt of owner:
-- returns its first live waiter (queue_head), or nil; whether owner is
-- recorded as gone (gone.lua); and whether the lock's key exists. One
-- EXISTS names gone once, queue twice and lock four times, and counts each
-- key as often as it is named, so its reply is the three answers in
-- binary. Nobody gone and nobody queued, the common case, costs that
-- EXISTS alone, whose answer about the lock spares the look at it that an
-- attempt would take otherwise: the uncontended acquire of a hash, and
-- the first attempt of an owner behind another waiter (look_at_lock).
local function look_ahead(gone, queue, lock, owner, n)
  n = n or redis_call('exists', gone, queue, queue, lock, lock, lock, lock)
  local head = nil
  if n % 4 >= 2 then
    head = queue_head(queue)
  end
  return head, n % 2 == 1 and is_gone(gone, owner), n >= 4
end

-- Returns what an acquire attempt learns from one look at lock, the
-- probe of behind_head: false when the lock is free, the owner id it was
-- handed to when a release handed it on, anything else when it is held.
-- cmd is the look: GET or HRANDFIELD (a hand-over's grant is a string or
-- a hash of its owner alone: grant_lock). locked is whether the lock's
-- key exists (look_ahead), and first whether this is the owner's first
-- attempt (ARGV "first"): a release hands the lock only to a waiter that
-- an earlier attempt queued, so for a first attempt locked says all that
-- matters, and the look is spared.
local function look_at_lock(lock, locked, first, cmd)
  if first then
    return locked
  end
  return redis_pcall(cmd, lock)
end

-- Wakes the first live waiter of queue by name, to try now; with nobody
-- queued, publishes otherwise instead, if not nil ("one", "": see
-- wake.lua). Commands and channel as wake_owner's.
local function wake_first(queue, pub, channel, otherwise)
  local head = queue_head(queue)
  if head then
    wake_owner(pub, channel, head.owner)
  elseif otherwise then
    redis_call(pub, channel, otherwise)
  end
end

-- enqueue's head for a queue that exists but whose first waiter the caller
-- did not read (it had no use for it: a semaphore's attempt with every
-- permit held). One table for every call of the library.
local unread_head = {}

-- Queues owner at the back of queue if it is not queued yet, to be granted
-- a lock as grant says (a record's grant: waiter_record), and sets its deadline to ms milliseconds from now;
-- head is the queue's first live waiter (queue_head), unread_head, or
-- nil: then the queue is empty. A newcomer behind a live waiter costs a ZRANGE (the
-- last waiter: its arrival and what its write made sure of the expiry)
-- and a ZADD; the expiry, once in a waiter timeout.
local function enqueue(queue, owner, ms, head, grant)
  ms = ms + 0
  if head and head.owner == owner then
    renew_waiter(queue, head, ms)
    return
  end
  local at, keep = server_us(), 0
  if head then
    local last = redis_call('zrange', queue, '-1', '-1', 'WITHSCORES')
    -- The last member is the last waiter's record (see above).
    local after = last[2] + 1
    if after > at + 0 then
      at = string_format('%d', after)
    end
    -- Its keep follows its owner id, which holds no space, and deadline:
    -- found from the first space, not by a pattern that scans the
    -- record from its end.
    local space = string_find(last[1], ' ', 1, true)
    local kept_until = space and string_match(last[1], '^%d+ (%d+) %a+$', space + 1)
    keep = kept_until and kept_until + 0 or 0
  end
  local deadline = server_ms() + ms
  local kept = keep >= deadline
  if not kept then
    keep = server_ms() + 2 * ms
  end
  local record = waiter_record(owner, deadline, keep, grant)
  if redis_call('zadd', queue, 'NX', at, owner, at, record) == 1 then
    -- owner was queued already (a waiter's later attempt): its record
    -- was added alone. Take it back, and move owner's deadline on.
    redis_call('zrem', queue, record)
    local w = find_waiter(queue, owner)
    if w then
      renew_waiter(queue, w, ms)
    end
    return
  end
  if not kept then
    outlive(queue, ms, 0, not head)
  end
end

-- Queues owner as an attempt asks (ARGV "wait"): flag "1" (a fair lock's
-- or writer's Lock, a starving waiter) always, "2" only behind a queue
-- (head is its first waiter, or nil), "0" (TryLock) never. Returns 1 when owner is queued, else 0 (the
-- attempt's reply says so: luascripts.Queued).
local function join_queue(queue, owner, flag, ms, head, grant)
  if flag == '1' or (flag == '2' and head) then
    enqueue(queue, owner, ms, head, grant)
    return 1
  end
  return 0
end

-- Wakes the first waiter of queue, if any, by name (publish on channel
-- with command pub), to try now.
local function wake_head(queue, pub, channel)
  local first = redis_call('zrange', queue, '0', '0')
  if first[1] then
    wake_owner(pub, channel, first[1])
  end
end

-- Takes the first waiter, which queue_head returned, off queue: it is
-- being granted the lock. Wakes the new first waiter by name (publish on
-- channel with command pub): it may be sleeping until the old first's
-- deadline (it found the lock free but was not first); woken, it finds
-- the lock held and sleeps until this lease's expiry instead, so that a
-- lease that expires without an Unlock hands the lock on as promptly as
-- an Unlock does. With pub nil, it does not wake anyone: the caller does,
-- after its grant.
local function pop_head(queue, pub, channel)
  redis_call('zremrangebyrank', queue, '0', '1')
  if pub then
    wake_head(queue, pub, channel)
  end
end

-- The reply of an acquire attempt that did not take the lock: {0, wait,
-- queued}, and, when queued is 1, the server's clock in milliseconds, by
-- which the waiter dates the hand-overs it is sent (their tokens are that
-- clock in microseconds when minted). A queued attempt read the clock
-- already: the time costs no command.
local function queued_reply(wait, queued)
  if queued == 1 then
    return {0, wait, 1, server_ms()}
  end
  return {0, wait, queued}
end

-- Removes owner from queue wherever it is (a waiter that gave up); reports
-- whether it was queued.
local function dequeue(queue, owner)
  local arrival = redis_call('zscore', queue, owner)
  if not arrival then
    return false
  end
  redis_call('zremrangebyscore', queue, arrival, arrival)
  return true
end

-- How long a failed attempt of owner may sleep, in milliseconds, with the
-- lock held (pttl: its time to live, or -1) and head first in the queue:
-- until the lock expires, and, when another waiter is first, no later
-- than its deadline. Should that waiter be granted the lock, the grant
-- expires at that deadline, or later when its heartbeats pushed it on;
-- should it die, it is purged then. Either way the waiters behind it look
-- again by then, without a wake-up: a release that hands the lock on
-- wakes the granted waiter alone.
local function held_wait(pttl, owner, head)
  if head and head.owner ~= owner then
    local left = head.deadline - server_ms()
    if pttl < 0 or left < pttl then
      return left
    end
  end
  return pttl
end

-- The wait of an attempt behind head, a live waiter that is not its
-- owner, on a held lock: head's remaining deadline (held_wait, without
-- asking the lock's time to live: the lock goes to head first, and the
-- waiters behind it look again by head's deadline should it never act).
local function behind_wait(head)
  return head.deadline - server_ms()
end

-- Takes up a grant that hand_on made to owner, now the holder of lock:
-- the lease from now on, and the fencing token hand_on issued (no grant
-- came since: owner holds the lock). When the lease is shorter than what
-- is left of the grant, wakes the first waiter of queue by name: it may be
-- sleeping until the grant's expiry, later than the lease's. The reply of
-- an acquire.
local function take_up(lock, fence, queue, owner, ms, pub, channel)
  local shorter = redis_call('pttl', lock) > tonumber(ms)
  redis_call('pexpire', lock, ms)
  if shorter then
    wake_head(queue, pub, channel)
  end
  return {1, redis_call('incrby', fence, 0)}
end

-- The reply of an attempt of owner that found head, another live waiter,
-- first: the lock is head's. probe is what a look at the lock said
-- (look_at_lock):
-- false when it is free (head is woken, and owner looks again by head's
-- deadline in case it died), owner when a release handed it to owner (the
-- attempt takes the grant up for lease ms), anything else when it is
-- held. flag, waiter_ms and grant as enqueue's and join_queue's.
local function behind_head(lock, fence, queue, owner, probe, lease_ms, flag, waiter_ms, grant, head, pub, channel)
  if probe == owner then
    return take_up(lock, fence, queue, owner, lease_ms, pub, channel)
  end
  local queued = join_queue(queue, owner, flag, waiter_ms, head, grant)
  if not probe then
    wake_owner(pub, channel, head.owner)
  end
  return queued_reply(behind_wait(head), queued)
end

-- Makes the lock at key held by owner for ms milliseconds as grant says
-- (a waiter's record). stale says the key may still hold the released
-- hold, of any type. Reports false for a grant these scripts cannot make
-- (a semaphore's waiter), with nothing changed.
local function grant_lock(key, owner, grant, ms, stale)
  if grant == grant_string then
    redis_call('set', key, owner, 'PX', ms)
  elseif grant == grant_hash then
    if stale then
      redis_call('del', key)
    end
    redis_call('hset', key, owner, 1)
    redis_call('pexpire', key, ms)
  else
    return false
  end
  return true
end

-- Hands the lock key, just released, to the first live waiter of queue,
-- if any (direct handoff), in the type that waiter's kind holds it
-- (grant_lock; stale as there): owner becomes the holder for ms
-- milliseconds, its remaining deadline in the queue, so that a granted
-- waiter that died holds the lock no longer than its waiter timeout; the
-- fence advances to the grant's token. The waiter, off the queue now, is
-- woken with a message "owner token": it holds the lock from then on, and
-- its watchdog extends the grant to its lease (a waiter that misses the
-- message takes the grant up by its next attempt, take_up). Nobody else
-- is woken: the waiters behind it sleep no later than its deadline, the
-- grant's expiry (held_wait), should it never act.
-- A first waiter these scripts cannot grant to (a semaphore's) keeps its
-- place and is woken by name to try now, as the lock is free.
-- first, if not nil, is the queue's first two members (and scores), which
-- the caller popped already (ZPOPMIN queue 2). Returns the granted owner,
-- or nil.
local function hand_on(fence, queue, key, stale, pub, channel, first)
  while true do
    first = first or redis_call('zpopmin', queue, 2)
    if not first[1] then
      return nil
    end
    local w = waiter(first[1], first[3], first[2])
    if w and w.deadline > server_ms() then
      if not grant_lock(key, w.owner, w.grant, math_max(w.deadline - server_ms(), 1), stale) then
        redis_call('zadd', queue, first[2], first[1], first[4], first[3])
        wake_owner(pub, channel, w.owner)
        return nil
      end
      wake_owner(pub, channel, w.owner, w.owner .. ' ' .. next_token_string(fence))
      return w.owner
    end
    if not w and first[3] then
      -- Not a waiter's pair: only the first member was none.
      redis_call('zadd', queue, first[4], first[3])
    end
    first = nil
  end
end
