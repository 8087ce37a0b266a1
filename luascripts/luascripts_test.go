package luascripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// lockKeys are the Redis names of one lock, laid out as the engine passes
// them (internal/kind.Spec).
type lockKeys struct {
	lock, fence, queue, readers, gone, wake string
}

// keysFor returns the keys of a lock unique to the test (and to name, when
// given), deleted first so that the test can run again on the same server
// (-count).
func keysFor(t *testing.T, rc rueidis.Client, name ...string) lockKeys {
	t.Helper()
	base := "scripts:{" + t.Name() + strings.Join(name, "/") + "}"
	k := lockKeys{base, base + ":fence", base + ":queue", base + ":readers", base + ":gone", base + ":wake"}
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key(k.lock, k.fence, k.queue, k.readers, k.gone).Build()).Error())
	return k
}

// acquireKeys are an acquire script's KEYS.
func (k lockKeys) acquireKeys() []string {
	return []string{k.lock, k.fence, k.queue, k.readers, k.gone}
}

// releaseKeys are a release script's KEYS.
func (k lockKeys) releaseKeys() []string {
	return []string{k.lock, k.queue, k.readers, k.gone, k.fence}
}

// lock returns the keys of a lock unique to the test, deleted first.
func lock(t *testing.T, rc rueidis.Client) (key, fence, channel string) {
	t.Helper()
	k := keysFor(t, rc)
	return k.lock, k.fence, k.wake
}

// acquireKeysOf are the acquire KEYS of the lock whose lock key is key.
func acquireKeysOf(key string) []string {
	return []string{key, key + ":fence", key + ":queue", key + ":readers", key + ":gone"}
}

// releaseKeysOf are the release KEYS of the lock whose lock key is key.
func releaseKeysOf(key string) []string {
	return []string{key, key + ":queue", key + ":readers", key + ":gone", key + ":fence"}
}

func serverMicros(t *testing.T, rc rueidis.Client) int64 {
	t.Helper()
	v, err := rc.Do(context.Background(), rc.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	s, _ := strconv.ParseInt(v[0], 10, 64)
	us, _ := strconv.ParseInt(v[1], 10, 64)
	return s*1e6 + us
}

func acquire(t *testing.T, rc rueidis.Client, key, fence, owner string, leaseMs int) []int64 {
	t.Helper()
	require.Equal(t, key+":fence", fence)
	v, err := luascripts.HeaderCall(luascripts.MutexAcquire, acquireKeysOf(key),
		[]string{owner, strconv.Itoa(leaseMs), "1", "5000", key + ":wake", "publish", ""}).Exec(context.Background(), rc).AsIntSlice()
	require.NoError(t, err)
	return reply(t, v)
}

// reply is an acquire reply's {acquired, token or wait}, without the
// queued flag and the server's clock that follows it.
func reply(t *testing.T, v []int64) []int64 {
	t.Helper()
	require.Contains(t, []int{2, 3, 4}, len(v), "reply %v", v)
	if len(v) == 4 {
		require.Equal(t, int64(1), v[2], "only a queued attempt's reply gives the clock: %v", v)
	}
	return v[:2]
}

// An attempt that queues its owner replies with the server's clock (ms),
// by which the waiter dates the hand-overs it is sent; one that does not
// queue it (a TryLock) does not.
func TestQueuedReplyCarriesTheServerClock(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	for _, s := range []struct {
		name   string
		script luascripts.Script
	}{
		{"mutex", luascripts.MutexAcquire},
		{"reentrant", luascripts.ReentrantAcquire},
		{"fair", luascripts.FairAcquire},
		{"rwlock", luascripts.RWWriteAcquire},
	} {
		t.Run(s.name, func(t *testing.T) {
			keys := luascripts.NewKeys("test", t.Name())
			call := func(owner string, wait bool) []int64 {
				v, err := luascripts.AcquireCall(s.script, keys, luascripts.Acquire{
					Owner: owner, LeaseMs: "10000", Wait: wait, Queue: true, WaiterMs: "5000", Publish: "publish",
				}).Exec(ctx, rc).AsIntSlice()
				require.NoError(t, err)
				return v
			}
			granted, _, _ := luascripts.AcquireReply(call("holder", true))
			require.True(t, granted)
			before := serverMicros(t, rc) / 1000
			v := call("waiter", true)
			after := serverMicros(t, rc) / 1000
			require.True(t, luascripts.Queued(v), "reply %v", v)
			ms, ok := luascripts.ServerMs(v)
			require.True(t, ok, "reply %v", v)
			assert.GreaterOrEqual(t, ms, before)
			assert.LessOrEqual(t, ms, after)
			_, ok = luascripts.ServerMs(call("try", false))
			assert.False(t, ok, "a TryLock's reply gives no clock")
		})
	}
}

func TestMutexAcquire(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	key, fence, _ := lock(t, rc)

	before := serverMicros(t, rc)
	got := acquire(t, rc, key, fence, "a", 10000)
	assert.Equal(t, int64(1), got[0], "a free lock is acquired")
	assert.GreaterOrEqual(t, got[1], before, "the first token is at least the server time in µs")
	owner, err := rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "a", owner)
	pttl, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.InDelta(t, 10000, pttl, 1000)

	other := acquire(t, rc, key, fence, "b", 10000)
	assert.Equal(t, int64(0), other[0], "a held lock is not acquired by another owner")
	assert.InDelta(t, 10000, other[1], 1000, "the failed attempt reports the holder's pttl")
	again := acquire(t, rc, key, fence, "a", 10000)
	assert.Equal(t, []int64{1, got[1]}, again[:2], "an owner's attempt while it holds the lock takes its grant up again (a release may have handed it over): same token")
	owner, _ = rc.Do(ctx, rc.B().Get().Key(key).Build()).ToString()
	assert.Equal(t, "a", owner, "failed attempts leave the holder in place")

	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
	next := acquire(t, rc, key, fence, "b", 10000)
	assert.Equal(t, int64(1), next[0])
	assert.Greater(t, next[1], got[1], "tokens increase")
}

func TestMutexAcquireTokenFloorAndCounter(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	key, fence, _ := lock(t, rc)

	// A counter ahead of the server clock (a clock step back): last + 1.
	const ahead = int64(9_000_000_000_000_000)
	require.NoError(t, rc.Do(ctx, rc.B().Set().Key(fence).Value(strconv.FormatInt(ahead, 10)).Build()).Error())
	got := acquire(t, rc, key, fence, "a", 1000)
	assert.Equal(t, []int64{1, ahead + 1}, got)
	stored, err := rc.Do(ctx, rc.B().Get().Key(fence).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, ahead+1, stored, "the counter is stored as an exact integer")

	// A forgotten counter (restart without persistence): the server time.
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key, fence).Build()).Error())
	before := serverMicros(t, rc)
	got = acquire(t, rc, key, fence, "a", 1000)
	assert.GreaterOrEqual(t, got[1], before)
	stored, err = rc.Do(ctx, rc.B().Get().Key(fence).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, got[1], stored, "the counter holds the token issued, digit for digit")
}

func TestMutexRelease(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	key, fence, channel := lock(t, rc)
	acquire(t, rc, key, fence, "a", 10000)

	release := func(owner string) int64 {
		n, err := luascripts.HeaderCall(luascripts.MutexRelease, releaseKeysOf(key), []string{owner, channel, "publish", "1", "0"}).Exec(ctx, rc).AsInt64()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int64(0), release("b"), "another owner cannot release")
	n, err := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a wrong-owner release leaves the lock")

	// The release wakes the waiters on the channel.
	sub := redistest.Shared(t).Client(t)
	got := make(chan struct{}, 1)
	subscribed := make(chan struct{})
	rctx, cancel := context.WithCancel(rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { close(subscribed) }))
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(rctx, sub.B().Subscribe().Channel(channel).Build(), func(rueidis.PubSubMessage) { got <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-subscribed

	assert.Equal(t, int64(1), release("a"))
	n, _ = rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
	assert.Equal(t, int64(0), n, "the owner's release deletes the lock")
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up published")
	}
	assert.Equal(t, int64(0), release("a"), "a second release finds nothing")
}

func TestRenew(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	key, fence, _ := lock(t, rc)
	renew := func(owner string, ms int) int64 {
		n, err := luascripts.HeaderCall(luascripts.Renew, []string{key}, []string{owner, strconv.Itoa(ms)}).Exec(ctx, rc).AsInt64()
		require.NoError(t, err)
		return n
	}
	pttl := func() int64 {
		n, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}

	assert.Equal(t, int64(0), renew("a", 60000), "no lock: nothing to renew")
	assert.Equal(t, int64(-2), pttl(), "renewal never creates the lock")

	acquire(t, rc, key, fence, "a", 1000)
	assert.Equal(t, int64(0), renew("b", 60000), "another owner's lock is not renewed")
	assert.LessOrEqual(t, pttl(), int64(1000))
	assert.Equal(t, int64(1), renew("a", 60000))
	assert.Greater(t, pttl(), int64(50000), "the owner's renewal extends the lease")

	// Hash locks (reentrant, fair): the owner is a field.
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
	require.NoError(t, rc.Do(ctx, rc.B().Hset().Key(key).FieldValue().FieldValue("a", "2").Build()).Error())
	require.NoError(t, rc.Do(ctx, rc.B().Pexpire().Key(key).Milliseconds(1000).Build()).Error())
	assert.Equal(t, int64(0), renew("b", 60000))
	assert.Equal(t, int64(1), renew("a", 60000))
	assert.Greater(t, pttl(), int64(50000))

	// Any other type is nobody's lock.
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key).Build()).Error())
	require.NoError(t, rc.Do(ctx, rc.B().Rpush().Key(key).Element("a").Build()).Error())
	assert.Equal(t, int64(0), renew("a", 60000))
}

func TestForceUnlock(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	key, fence, channel := lock(t, rc)
	force := func() int64 {
		n, err := luascripts.HeaderCall(luascripts.ForceUnlock, []string{key}, []string{channel, "publish", "0"}).Exec(ctx, rc).AsInt64()
		require.NoError(t, err)
		return n
	}
	assert.Equal(t, int64(0), force(), "nothing to unlock")
	acquire(t, rc, key, fence, "a", 10000)
	assert.Equal(t, int64(1), force())
	n, _ := rc.Do(ctx, rc.B().Exists().Key(key).Build()).AsInt64()
	assert.Equal(t, int64(0), n)
}

func TestExecMultiMixesScriptsAndReloads(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	ctx := context.Background()
	key, fence, _ := lock(t, rc)
	acquire(t, rc, key, fence, "a", 1000)

	// Flushed scripts (a restart, a failover) come back through EVAL.
	require.NoError(t, rc.Do(ctx, rc.B().ScriptFlush().Build()).Error())
	res := luascripts.ExecMulti(ctx, rc,
		luascripts.HeaderCall(luascripts.Renew, []string{key}, []string{"a", "60000"}),
		luascripts.HeaderCall(luascripts.ForceUnlock, []string{key + "x"}, []string{"ch", "publish"}),
		luascripts.HeaderCall(luascripts.Renew, []string{key}, []string{"b", "60000"}),
	)
	require.Len(t, res, 3)
	for i, want := range []int64{1, 0, 0} {
		n, err := res[i].AsInt64()
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, want, n, "call %d", i)
	}
	assert.Empty(t, luascripts.ExecMulti(ctx, rc))
}

// Every release, re-entry and renewal script refuses an owner that does not
// hold the lock, and leaves the lock as it was.
func TestHashScriptsRefuseWrongOwner(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	k := keysFor(t, rc)
	for _, tc := range []struct {
		name    string
		acquire luascripts.Script
		calls   []luascripts.Call
	}{
		{"reentrant", luascripts.ReentrantAcquire, []luascripts.Call{
			{Script: luascripts.ReentrantReenter, Keys: []string{k.lock, k.readers}, Args: []string{"b", "60000", "2"}},
			luascripts.HeaderCall(luascripts.ReentrantRelease, k.releaseKeys(), []string{"b", k.wake, "publish", "1", "0"}),
			{Script: luascripts.Renew, Keys: []string{k.lock, k.readers}, Args: []string{"b", "60000"}},
		}},
		{"fair", luascripts.FairAcquire, []luascripts.Call{
			luascripts.HeaderCall(luascripts.FairRelease, k.releaseKeys(), []string{"b", k.wake, "publish", "1", "0"}),
		}},
		{"rwlock", luascripts.RWWriteAcquire, []luascripts.Call{
			{Script: luascripts.RWReenter, Keys: []string{k.lock, k.readers}, Args: []string{"b", "60000", "2"}},
			luascripts.HeaderCall(luascripts.RWRelease, k.releaseKeys(), []string{"b", k.wake, "publish", "1", "0"}),
			{Script: luascripts.RWRenew, Keys: []string{k.lock, k.readers}, Args: []string{"b", "60000"}},
		}},
	} {
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k.lock, k.queue, k.readers).Build()).Error())
		got, err := luascripts.HeaderCall(tc.acquire, k.acquireKeys(),
			[]string{"a", "10000", "1", "5000", k.wake, "publish", ""}).Exec(ctx, rc).AsIntSlice()
		require.NoError(t, err, tc.name)
		require.Equal(t, int64(1), got[0], tc.name)
		before, err := rc.Do(ctx, rc.B().Dump().Key(k.lock).Build()).ToString()
		require.NoError(t, err)
		for _, call := range tc.calls {
			n, err := luascripts.ExecMulti(ctx, rc, call)[0].AsInt64()
			require.NoError(t, err, tc.name)
			assert.Equal(t, int64(0), n, "%s: the wrong owner is refused", tc.name)
		}
		after, err := rc.Do(ctx, rc.B().Dump().Key(k.lock).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: the lock is untouched", tc.name)
		pttl, err := rc.Do(ctx, rc.B().Pttl().Key(k.lock).Build()).AsInt64()
		require.NoError(t, err)
		assert.LessOrEqual(t, pttl, int64(10000), "%s: not extended", tc.name)
	}
}

// do runs cmd and fails the test on an error.
func do(t *testing.T, rc rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := rc.Do(context.Background(), cmd)
	require.NoError(t, r.Error())
	return r
}

func pttl(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	n, err := do(t, rc, rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

func exists(t *testing.T, rc rueidis.Client, key string) bool {
	t.Helper()
	n, err := do(t, rc, rc.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// zscore returns member's score in key, and whether it has one.
func zscore(t *testing.T, rc rueidis.Client, key, member string) (int64, bool) {
	t.Helper()
	f, err := rc.Do(context.Background(), rc.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0, false
	}
	require.NoError(t, err)
	return int64(f), true
}

// waiting returns owner's deadline (server time, ms) in k's queue, and
// reports whether owner is queued.
func (k lockKeys) waiting(t *testing.T, rc rueidis.Client, owner string) (int64, bool) {
	t.Helper()
	for _, w := range k.waiters(t, rc) {
		if w.Owner == owner {
			return w.DeadlineMs, true
		}
	}
	return 0, false
}

// owners returns the owners queued in k's queue, in arrival order.
func (k lockKeys) owners(t *testing.T, rc rueidis.Client) []string {
	t.Helper()
	var owners []string
	for _, w := range k.waiters(t, rc) {
		owners = append(owners, w.Owner)
	}
	return owners
}

// waiters returns the waiters of k's queue, in arrival order.
func (k lockKeys) waiters(t *testing.T, rc rueidis.Client) []luascripts.QueuedWaiter {
	t.Helper()
	members, err := rc.Do(context.Background(), rc.B().Zrange().Key(k.queue).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return luascripts.ParseQueue(members)
}

// run executes script with keys and args, and returns its reply.
func run(t *testing.T, rc rueidis.Client, script luascripts.Script, keys, args []string) rueidis.RedisResult {
	t.Helper()
	r := luascripts.HeaderCall(script, keys, args).Exec(context.Background(), rc)
	require.NoError(t, r.Error())
	return r
}

// acquireArgs are an acquire script's ARGV: owner, lease, wait ("1"/"0"),
// waiter timeout, channel, publish command, owner of the caller's write
// hold (""), first attempt ("0": not said).
func (k lockKeys) acquireArgs(owner string, leaseMs int, wait bool, waiterMs int) []string {
	flag := "0"
	if wait {
		flag = "1"
	}
	return []string{owner, strconv.Itoa(leaseMs), flag, strconv.Itoa(waiterMs), k.wake, "publish", "", "0"}
}

// try runs an acquire script and returns its {acquired, token or wait}.
func (k lockKeys) try(t *testing.T, rc rueidis.Client, script luascripts.Script, owner string, leaseMs int, wait bool, waiterMs int) []int64 {
	t.Helper()
	v, err := run(t, rc, script, k.acquireKeys(), k.acquireArgs(owner, leaseMs, wait, waiterMs)).AsIntSlice()
	require.NoError(t, err)
	return reply(t, v)
}

// release runs a release script ending depth holds of owner, recording it
// as gone for goneMs (0: not), and returns its reply.
func (k lockKeys) release(t *testing.T, rc rueidis.Client, script luascripts.Script, owner string, depth, goneMs int) int64 {
	t.Helper()
	n, err := run(t, rc, script, k.releaseKeys(), []string{owner, k.wake, "publish", strconv.Itoa(depth), strconv.Itoa(goneMs)}).AsInt64()
	require.NoError(t, err)
	return n
}

// heartbeat runs the waiter heartbeat of owner and returns its reply.
func (k lockKeys) heartbeat(t *testing.T, rc rueidis.Client, owner string, waiterMs int) int64 {
	t.Helper()
	n, err := run(t, rc, luascripts.WaiterHeartbeat, []string{k.lock, k.queue},
		[]string{owner, strconv.Itoa(waiterMs), k.wake, "publish"}).AsInt64()
	require.NoError(t, err)
	return n
}

// reenter runs a re-entry script and returns its reply.
func (k lockKeys) reenter(t *testing.T, rc rueidis.Client, script luascripts.Script, owner string, leaseMs, depth int) int64 {
	t.Helper()
	n, err := run(t, rc, script, []string{k.lock, k.readers}, []string{owner, strconv.Itoa(leaseMs), strconv.Itoa(depth)}).AsInt64()
	require.NoError(t, err)
	return n
}

// kindScripts are the scripts of one kind (and mode), as its kind.Spec
// names them.
type kindScripts struct {
	name                             string
	acquire, reenter, release, renew luascripts.Script
	heartbeat                        luascripts.Script // None: waiters leave no trace
	queues                           bool              // a waiting Lock leaves a trace (fair queue, waiting writer)
}

var kinds = []kindScripts{
	{"mutex", luascripts.MutexAcquire, luascripts.None, luascripts.MutexRelease, luascripts.Renew, luascripts.None, false},
	{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantReenter, luascripts.ReentrantRelease, luascripts.Renew, luascripts.None, false},
	{"fair", luascripts.FairAcquire, luascripts.ReentrantReenter, luascripts.FairRelease, luascripts.Renew, luascripts.WaiterHeartbeat, true},
	{"rwlock read", luascripts.RWReadAcquire, luascripts.RWReenter, luascripts.RWRelease, luascripts.RWRenew, luascripts.None, false},
	{"rwlock write", luascripts.RWWriteAcquire, luascripts.RWReenter, luascripts.RWRelease, luascripts.RWRenew, luascripts.WaiterHeartbeat, true},
}

// eventually polls cond until it holds, and fails the test if it does not
// within 20 seconds (like internal/locktest.Eventually, which this package's
// tests do not import: they run without the engine).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
