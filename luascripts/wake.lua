-- wake: a fragment, not a script: prepended to the scripts that publish
-- wake-ups.
--
-- A lock has two kinds of channel. Its wake-up channel (ARGV's channel,
-- P:{E}:wake) carries the wake-ups that any waiter may act on: "" wakes
-- every waiter, "one" one waiter per client. A wake-up for one named
-- waiter goes to the channel of that waiter's client alone, the lock's
-- channel and the client's id (P:{E}:wake:<client id>), so that a release
-- that hands the lock on wakes the one process that waits for it, not
-- every process with a waiter on the lock. An owner id is the client's id
-- and a counter, "id:seq"; the client id holds no colon.

-- Publishes payload (the owner id when nil) with command pub on the
-- channel of owner's client.
local function wake_owner(pub, channel, owner, payload)
  redis.call(pub, channel .. ':' .. string.match(owner, '^[^:]*'), payload or owner)
end
