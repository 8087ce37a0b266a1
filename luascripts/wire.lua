-- wire: a fragment, not a script: prepended, after time.lua, to the
-- acquire and release scripts. The Lua side of their calls' wire form
-- (abi.go, AcquireCall and ReleaseCall): a call passes the lock's key
-- alone and its arguments packed, and the function of the script (or
-- the script run by EVAL) unpacks them, before its body, into the KEYS
-- and ARGV its header names.
--
-- Why: Redis builds a script's KEYS and ARGV as tables grown one element
-- at a time, a rehash at each power of two, and interns each string: for
-- an uncontended acquire and release, passed as their headers name them,
-- a sixth of the instructions Redis ran (abi.go). The lock's other keys
-- are its key and a suffix (abi.go, NewKeys); they share its hash tag,
-- hence its cluster slot.

-- The keys of the last lock a call named (a function keeps them between
-- calls; a script run by EVAL has none): calls on one lock, its holder's
-- and its waiters', find them made.
local wire_lock, wire_keys

-- Returns the keys of the lock whose key is lock: the KEYS of an acquire
-- (acquire) and of a release (release), and the wake-up channel (wake).
local function lock_keys(lock)
  if lock ~= wire_lock then
    local fence, queue, readers, gone = lock .. ':fence', lock .. ':queue', lock .. ':readers', lock .. ':gone'
    wire_keys = {acquire = {lock, fence, queue, readers, gone}, release = {lock, queue, readers, gone, fence},
      wake = lock .. ':wake'}
    wire_lock = lock
  end
  return wire_keys
end

-- The publish command a packed mode names at byte i: "s" for SPUBLISH,
-- anything else PUBLISH.
local function publish_of(mode, i)
  if string_byte(mode, i) == 115 then -- 's'
    return 'spublish'
  end
  return 'publish'
end

-- Unpacks an acquire call: KEYS {lock}, ARGV {owner, lease ms, waiter
-- timeout ms, mode, the kind's own…}, mode being the queue flag (ARGV[3]
-- of the header), the first-attempt flag, the publish command's initial
-- and the Within owner (the rest). Returns the KEYS and ARGV the acquire
-- scripts' headers name. A kind's own ARGV are two at most (the
-- semaphore's).
local function acquire_call(keys, argv)
  local k = lock_keys(keys[1])
  local mode = argv[4]
  return k.acquire, {argv[1], argv[2], string_sub(mode, 1, 1), argv[3], k.wake, publish_of(mode, 3),
    string_sub(mode, 4), string_sub(mode, 2, 2), argv[5], argv[6]}
end

-- Unpacks a release call: KEYS {lock}, ARGV {owner, mode[, gone ms]},
-- mode being the publish command's initial and the hold count ended;
-- gone ms is "0" when left out. Returns the KEYS and ARGV the release
-- scripts' headers name.
local function release_call(keys, argv)
  local k = lock_keys(keys[1])
  local mode = argv[2]
  return k.release, {argv[1], k.wake, publish_of(mode, 1), string_sub(mode, 2), argv[3] or '0'}
end
