package locktest

// FloorLibrary is a Redis function library for benchmarks, not for locks: the
// commands that an uncontended acquire and release of the mutex need to
// keep the contract (EXISTS of the queue and gone keys, SET NX GET, TIME
// and the fence's SET … GET; GET, EXISTS of the queue, DEL, the wake-up
// PUBLISH), in two functions that run them and nothing else, on the keys
// they derive from the lock's as the scripts do (luascripts/wire.lua).
// Called with the packed calls' KEYS {lock} and ARGV {owner, lease ms}
// (FloorAcquire) and {owner} (FloorRelease), they are the floor of Redis's time for an
// uncontended Lock+Unlock: what relock's scripts cost above it is theirs.
// FloorAcquire replies {1, token} when it took the lock, else {0, 0};
// FloorRelease 1 when it released it, else 0. FUNCTION LOAD REPLACE loads
// it (Redis 7 or later; miniredis has no functions).
const FloorLibrary = `#!lua name=relock_floor
redis.register_function('floor_empty_acquire', function(KEYS, ARGV) return {1, 1} end)
redis.register_function('floor_empty_release', function(KEYS, ARGV) return 1 end)
redis.register_function('floor_acquire', function(KEYS, ARGV)
  local lock = KEYS[1]
  if redis.call('exists', lock .. ':queue', lock .. ':gone') ~= 0 then return {0, 0} end
  if redis.pcall('set', lock, ARGV[1], 'NX', 'PX', ARGV[2], 'GET') then return {0, 0} end
  local t = redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('set', lock .. ':fence', now, 'PX', 86400000, 'GET')
  return {1, tonumber(now)}
end)
redis.register_function{function_name='floor_release', flags={'allow-oom'}, callback=function(KEYS, ARGV)
  local lock = KEYS[1]
  if redis.pcall('get', lock) ~= ARGV[1] then return 0 end
  if redis.call('exists', lock .. ':queue') ~= 0 then return 0 end
  redis.call('del', lock)
  redis.call('publish', lock .. ':wake', 'one')
  return 1
end}
`

// The functions of FloorLibrary: the floor pair, and two that only
// return (the cost of the calls themselves).
const (
	FloorAcquire      = "floor_acquire"
	FloorRelease      = "floor_release"
	FloorEmptyAcquire = "floor_empty_acquire"
	FloorEmptyRelease = "floor_empty_release"
)
