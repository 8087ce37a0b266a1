package luascripts_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// lock returns the keys of a lock unique to the test, deleted first so that
// the test can run again on the same server (-count).
func lock(t *testing.T, rc rueidis.Client) (key, fence, channel string) {
	t.Helper()
	base := "scripts:{" + t.Name() + "}"
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key(base, base+":fence").Build()).Error())
	return base, base + ":fence", base + ":wake"
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
	v, err := luascripts.MutexAcquire.Exec(context.Background(), rc, []string{key, fence}, []string{owner, strconv.Itoa(leaseMs)}).AsIntSlice()
	require.NoError(t, err)
	require.Len(t, v, 2)
	return v
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
	assert.Equal(t, int64(0), again[0], "the acquire script does not re-enter")
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
		n, err := luascripts.MutexRelease.Exec(ctx, rc, []string{key}, []string{owner, channel, "publish", "1"}).AsInt64()
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
		n, err := luascripts.Renew.Exec(ctx, rc, []string{key}, []string{owner, strconv.Itoa(ms)}).AsInt64()
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
		n, err := luascripts.ForceUnlock.Exec(ctx, rc, []string{key}, []string{channel, "publish"}).AsInt64()
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
		luascripts.Call{Script: luascripts.Renew, Keys: []string{key}, Args: []string{"a", "60000"}},
		luascripts.Call{Script: luascripts.ForceUnlock, Keys: []string{key + "x"}, Args: []string{"ch", "publish"}},
		luascripts.Call{Script: luascripts.Renew, Keys: []string{key}, Args: []string{"b", "60000"}},
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
	key, fence, channel := lock(t, rc)
	queue, waiters, readers := key+":queue", key+":waiters", key+":readers"
	for _, tc := range []struct {
		name    string
		acquire *rueidis.Lua
		calls   []luascripts.Call
	}{
		{"reentrant", luascripts.ReentrantAcquire, []luascripts.Call{
			{Script: luascripts.ReentrantReenter, Keys: []string{key, readers}, Args: []string{"b", "60000", "2"}},
			{Script: luascripts.ReentrantRelease, Keys: []string{key, queue, waiters, readers}, Args: []string{"b", channel, "publish", "1"}},
			{Script: luascripts.Renew, Keys: []string{key, readers}, Args: []string{"b", "60000"}},
		}},
		{"fair", luascripts.FairAcquire, []luascripts.Call{
			{Script: luascripts.FairRelease, Keys: []string{key, queue, waiters, readers}, Args: []string{"b", channel, "publish", "1"}},
		}},
		{"rwlock", luascripts.RWWriteAcquire, []luascripts.Call{
			{Script: luascripts.RWReenter, Keys: []string{key, readers}, Args: []string{"b", "60000", "2"}},
			{Script: luascripts.RWRelease, Keys: []string{key, queue, waiters, readers}, Args: []string{"b", channel, "publish", "1"}},
			{Script: luascripts.RWRenew, Keys: []string{key, readers}, Args: []string{"b", "60000"}},
		}},
	} {
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(key, queue, waiters, readers).Build()).Error())
		got, err := tc.acquire.Exec(ctx, rc, []string{key, fence, queue, waiters, readers},
			[]string{"a", "10000", "1", "5000", channel, "publish", ""}).AsIntSlice()
		require.NoError(t, err, tc.name)
		require.Equal(t, int64(1), got[0], tc.name)
		before, err := rc.Do(ctx, rc.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		for _, call := range tc.calls {
			n, err := luascripts.ExecMulti(ctx, rc, call)[0].AsInt64()
			require.NoError(t, err, tc.name)
			assert.Equal(t, int64(0), n, "%s: the wrong owner is refused", tc.name)
		}
		after, err := rc.Do(ctx, rc.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: the lock is untouched", tc.name)
		pttl, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.LessOrEqual(t, pttl, int64(10000), "%s: not extended", tc.name)
	}
}
