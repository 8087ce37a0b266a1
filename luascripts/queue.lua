-- queue: a fragment, not a script: prepended, after time.lua, fence.lua
-- and wake.lua, to the
-- scripts of the kinds whose waiters take places in a queue: the fair lock
-- (every waiter, from its first attempt) and the mutex and reentrant lock
-- (a waiter that has waited long enough to be starving, and every waiter
-- behind it; see internal/kind.Spec.QueueAfter).
--
-- The queue is two keys: a list of owner ids in arrival order, and a zset
-- of their deadlines on the server clock. A waiter's attempts and its
-- heartbeats push its deadline forward; one whose deadline passes (it died,
-- or cannot reach Redis) is purged: when it comes first (queue_head), or
-- by a heartbeat of another waiter (waiter_heartbeat.lua). Both keys are
-- only ever updated together, and both expire when every deadline in them
-- has passed.

-- Returns the first waiter of queue whose deadline has not passed and that
-- deadline (server time, ms), or nil, purging the waiters before it, whose
-- deadline has passed. An absent queue costs one LINDEX: the uncontended
-- acquire pays nothing more.
local function queue_head(queue, deadlines)
  local head = redis.call('lindex', queue, 0)
  while head do
    local deadline = redis.call('zscore', deadlines, head)
    if deadline and tonumber(deadline) > server_ms() then
      return head, tonumber(deadline)
    end
    -- Dead: its deadline passed, or went with the deadlines' key.
    redis.call('lpop', queue)
    if deadline then
      redis.call('zrem', deadlines, head)
    end
    head = redis.call('lindex', queue, 0)
  end
  return nil
end

-- Looks at the queue before an acquire attempt of owner: returns its
-- first live waiter and that waiter's deadline (queue_head), or nil, and
-- whether owner is recorded as gone (gone.lua). Nobody gone and nobody
-- queued, the common case, costs one EXISTS; with a live waiter queued and
-- nobody gone, so does the gone check.
local function look_ahead(gone, queue, deadlines, owner)
  local others = redis.call('exists', gone, queue)
  if others == 0 then
    return nil, nil, false
  end
  local head, deadline = queue_head(queue, deadlines)
  return head, deadline, others > (head and 1 or 0) and is_gone(gone, owner)
end

-- Wakes the first live waiter of queue by name, to try now; with nobody
-- queued, publishes otherwise instead, if not nil ("one", "": see
-- wake.lua). Commands and channel as wake_owner's.
local function wake_first(queue, deadlines, pub, channel, otherwise)
  local head = queue_head(queue, deadlines)
  if head then
    wake_owner(pub, channel, head)
  elseif otherwise then
    redis.call(pub, channel, otherwise)
  end
end

-- Queues owner at the back of queue if it is not queued yet, and sets its
-- deadline to ms milliseconds from now; head is the queue's first live
-- waiter (queue_head), or nil. The keys' expiries are only ever extended:
-- waiters may have different timeouts, and a short one must not make the
-- queue expire under a waiter with a long one.
local function enqueue(queue, deadlines, owner, ms, head)
  if not head and redis.call('exists', queue) == 0 then
    -- Deadlines left by a queue that expired first belong to nobody queued.
    redis.call('del', deadlines)
  end
  if redis.call('zadd', deadlines, server_ms() + tonumber(ms), owner) == 1 then
    redis.call('rpush', queue, owner)
  end
  if head then
    -- Both keys were there, with the expiry every enqueue gives them.
    redis.call('pexpire', queue, ms, 'GT')
    redis.call('pexpire', deadlines, ms, 'GT')
  else
    extend(queue, ms)
    extend(deadlines, ms)
  end
end

-- Queues owner as a mutex's or reentrant lock's attempt asks: flag "1"
-- (a starving waiter) always, "2" only behind a queue (head is its first
-- waiter, or nil), "0" never. Returns 1 when owner is queued, else 0 (the
-- attempt's reply says so: luascripts.Queued).
local function join_queue(queue, deadlines, owner, flag, ms, head)
  if flag == '1' or (flag == '2' and head) then
    enqueue(queue, deadlines, owner, ms, head)
    return 1
  end
  return 0
end

-- Wakes the first waiter of queue, if any, by name (publish on channel
-- with command pub), to try now.
local function wake_head(queue, pub, channel)
  local first = redis.call('lindex', queue, 0)
  if first then
    wake_owner(pub, channel, first)
  end
end

-- Takes the first waiter, owner, off queue: it is being granted the lock.
-- Wakes the new first waiter by name (publish on channel with command
-- pub): it may be sleeping until owner's deadline (it found the lock free
-- but was not first); woken, it finds the lock held and sleeps until this
-- lease's expiry instead, so that a lease that expires without an Unlock
-- hands the lock on as promptly as an Unlock does.
-- With pub nil, it does not wake anyone: the caller does, after its grant.
local function pop_head(queue, deadlines, owner, pub, channel)
  redis.call('lpop', queue)
  redis.call('zrem', deadlines, owner)
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
local function dequeue(queue, deadlines, owner)
  if redis.call('zrem', deadlines, owner) == 0 then
    return false
  end
  redis.call('lrem', queue, 1, owner)
  return true
end

-- How long a failed attempt of owner may sleep, in milliseconds, with the
-- lock held (pttl: its time to live, or -1) and head, whose deadline is
-- deadline, first in the queue: until the lock expires, and, when another
-- waiter is first, no later than its deadline. Should that waiter be
-- granted the lock, the grant expires at that deadline, or later when its
-- heartbeats pushed it on; should it die, it is purged then. Either way
-- the waiters behind it look again by then, without a wake-up: a release
-- that hands the lock on wakes the granted waiter alone.
local function held_wait(pttl, owner, head, deadline)
  if head and head ~= owner then
    local left = deadline - server_ms()
    if pttl < 0 or left < pttl then
      return left
    end
  end
  return pttl
end

-- Hands the lock, just released, to the first live waiter of queue, if
-- any (direct handoff): grant(owner, ms) makes owner the holder for ms
-- milliseconds, its remaining deadline in the queue, so that a granted
-- waiter that died holds the lock no longer than its waiter timeout; the
-- fence advances to the grant's token. The waiter, off the queue now, is
-- woken with a message "owner token": it holds the lock from then on, and
-- its watchdog extends the grant to its lease (a waiter that misses the
-- message takes the grant up by its next attempt, take_up). Nobody else is
-- woken: the waiters behind it sleep no later than its deadline, the
-- grant's expiry (held_wait), should it never act.
-- Returns the granted owner, or nil.
local function hand_on(fence, queue, deadlines, pub, channel, grant)
  local head, deadline = queue_head(queue, deadlines)
  if not head then
    return nil
  end
  local ms = math.max(deadline - server_ms(), 1)
  pop_head(queue, deadlines, head)
  grant(head, ms)
  -- '%.0f': Lua prints a number this large in exponent form.
  wake_owner(pub, channel, head, head .. ' ' .. string.format('%.0f', next_token(fence)))
  return head
end

-- Takes up a grant that hand_on made to owner, now the holder of lock:
-- the lease from now on, and the fencing token hand_on issued (no grant
-- came since: owner holds the lock). When the lease is shorter than what
-- is left of the grant, wakes the first waiter of queue by name: it may be
-- sleeping until the grant's expiry, later than the lease's. The reply of
-- an acquire.
local function take_up(lock, fence, queue, owner, ms, pub, channel)
  local shorter = redis.call('pttl', lock) > tonumber(ms)
  redis.call('pexpire', lock, ms)
  if shorter then
    wake_head(queue, pub, channel)
  end
  return {1, redis.call('incrby', fence, 0)}
end
