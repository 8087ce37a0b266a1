-- wake: a fragment, not a script: prepended to the scripts that publish
-- wake-ups for one named waiter, or tell a holder its hold ended.
--
-- A wake-up or notice that names an owner goes to the channel of that
-- owner's client for this lock: the lock's channel, ':', and the client id,
-- which is the owner id up to its last ':' (owner ids are "<client id>:<seq>").
-- Only that client hears it, so a hand-over wakes one process however many
-- wait. The channel shares the lock's hash tag, hence its cluster slot.

-- Returns the channel of owner's client for the lock whose channel is
-- channel; the lock's channel itself for an owner id without a client id.
-- The last ':' is looked for from the end, byte by byte: it is a few
-- bytes from there (the sequence number), and a pattern ('^(.*):') would
-- scan the whole id and back.
local function owner_channel(channel, owner)
  for i = #owner, 1, -1 do
    if string_byte(owner, i) == 58 then -- ':'
      return channel .. ':' .. string_sub(owner, 1, i - 1)
    end
  end
  return channel
end

-- Publishes payload (the owner id when nil: "try now"; "owner token" for a
-- hand-over) with command pub on the channel of owner's client.
local function wake_owner(pub, channel, owner, payload)
  redis_call(pub, owner_channel(channel, owner), payload or owner)
end

-- Tells owner's client that owner's hold ended by another's call: the loss
-- notice "lost owner". Always a plain PUBLISH, in cluster mode too: the
-- client hears its notices through one pattern subscription, which sharded
-- pub/sub lacks, and a notice is rare enough to go to every node.
local function tell_lost(channel, owner)
  redis_call('publish', owner_channel(channel, owner), 'lost ' .. owner)
end
