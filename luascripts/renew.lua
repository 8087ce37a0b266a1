-- renew: extend a held lease, whatever the lock kind, if the caller still owns
-- it, to at least the given length from now; never shortens it (a re-entry or
-- an explicit extension may have made it longer). Never creates the lock.
-- Runs after time.lua and owner.lua.
--
-- KEYS[1]  the lock: a string holding the owner id (mutex) or a hash with
--          the owner id as a field (reentrant, fair)
-- ARGV[1]  owner id
-- ARGV[2]  lease, milliseconds
--
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
if holder(KEYS[1]) ~= ARGV[1] and not holds(KEYS[1], ARGV[1]) then
  return 0
end
extend(KEYS[1], ARGV[2])
return 1
