-- wake: a fragment, not a script: prepended to the scripts that publish
-- wake-ups for one named waiter.

-- Publishes payload (the owner id when nil: "try now"; "owner token" for a
-- hand-over) with command pub on the lock's wake-up channel. Every client
-- with a waiter on the lock hears it, and only owner's waiter acts on it.
local function wake_owner(pub, channel, owner, payload)
  redis.call(pub, channel, payload or owner)
end
