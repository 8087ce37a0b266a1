package luascripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// A re-entry passing a shorter lease than the hold's never shortens the
// lock's expiry, a reader's deadline or the readers' expiry: the holder
// counts on the longer one (its ValidUntil). A longer lease extends them.
func TestReenterNeverShortensExpiry(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	const long, short = 30000, 100
	for _, tc := range []struct {
		name             string
		acquire, reenter luascripts.Script
		reader           bool
	}{
		{"reentrant", luascripts.ReentrantAcquire, luascripts.ReentrantReenter, false},
		{"fair", luascripts.FairAcquire, luascripts.ReentrantReenter, false},
		{"rwlock read", luascripts.RWReadAcquire, luascripts.RWReenter, true},
		{"rwlock write", luascripts.RWWriteAcquire, luascripts.RWReenter, false},
	} {
		k := keysFor(t, rc, tc.name)
		require.Equal(t, int64(1), k.try(t, rc, tc.acquire, "a", long, true, 5000)[0], tc.name)
		deadline, _ := zscore(t, rc, k.readers, "a")

		require.Equal(t, int64(1), k.reenter(t, rc, tc.reenter, "a", short, 2), tc.name)
		assert.Greater(t, pttl(t, rc, k.lock), int64(long/2), "%s: the lock's expiry is not shortened", tc.name)
		holds, err := do(t, rc, rc.B().Hget().Key(k.lock).Field("a").Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "2", holds, tc.name)
		if tc.reader {
			after, ok := zscore(t, rc, k.readers, "a")
			require.True(t, ok, tc.name)
			assert.GreaterOrEqual(t, after, deadline, "%s: the reader's deadline does not move earlier", tc.name)
			assert.Greater(t, pttl(t, rc, k.readers), int64(long/2), "%s: the readers' expiry is not shortened", tc.name)
		}

		require.Equal(t, int64(1), k.reenter(t, rc, tc.reenter, "a", 3*long, 3), tc.name)
		assert.Greater(t, pttl(t, rc, k.lock), int64(2*long), "%s: a longer lease extends the lock", tc.name)
		if tc.reader {
			after, _ := zscore(t, rc, k.readers, "a")
			assert.Greater(t, after, deadline+long, "%s: and the reader's deadline", tc.name)
			assert.Greater(t, pttl(t, rc, k.readers), int64(2*long), "%s: and the readers' expiry", tc.name)
		}
	}
}

// Waiters with different timeouts share the queue: a
// waiter with a short timeout, by its attempt or its heartbeat, never
// shortens their expiry under a waiter with a long one.
func TestSharedKeyExpiriesOnlyLengthen(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	const long, short = 20000, 200
	for _, tc := range []struct {
		name             string
		acquire, release luascripts.Script
		shared           []string
	}{
		{"fair", luascripts.FairAcquire, luascripts.FairRelease, []string{"queue"}},
		{"rwlock write", luascripts.RWWriteAcquire, luascripts.RWRelease, []string{"queue"}},
	} {
		k := keysFor(t, rc, tc.name)
		keyOf := map[string]string{"queue": k.queue}
		require.Equal(t, int64(1), k.try(t, rc, tc.acquire, "h", 60000, true, long)[0], tc.name)
		require.Equal(t, int64(0), k.try(t, rc, tc.acquire, "a", 60000, true, long)[0], tc.name)
		check := func(after string) {
			t.Helper()
			for _, name := range tc.shared {
				assert.Greater(t, pttl(t, rc, keyOf[name]), int64(long/2), "%s: %s's expiry after %s", tc.name, name, after)
			}
		}
		check("a long waiter's attempt")
		require.Equal(t, int64(0), k.try(t, rc, tc.acquire, "c", 60000, true, short)[0], tc.name)
		check("a short waiter's attempt")
		require.Equal(t, int64(1), k.heartbeat(t, rc, "c", short), tc.name)
		check("a short waiter's heartbeat")
		require.Equal(t, int64(0), k.release(t, rc, tc.release, "c", 1, 0), tc.name)
		check("the short waiter's withdrawal")
	}

	// Readers with different leases share the readers key and the lock.
	k := keysFor(t, rc, "readers")
	require.Equal(t, int64(1), k.try(t, rc, luascripts.RWReadAcquire, "r1", 60000, true, 5000)[0])
	require.Equal(t, int64(1), k.try(t, rc, luascripts.RWReadAcquire, "r2", 100, true, 5000)[0])
	assert.Greater(t, pttl(t, rc, k.readers), int64(30000))
	assert.Greater(t, pttl(t, rc, k.lock), int64(30000))
}

// The fence counter expires a day after the last grant, whichever path
// issued the token (counter or clock floor): no key outlives its use.
func TestFenceKeyExpires(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	const day = 24 * 60 * 60 * 1000
	for _, kd := range kinds {
		k := keysFor(t, rc, kd.name)
		require.Equal(t, int64(1), k.try(t, rc, kd.acquire, "a", 1000, true, 5000)[0], kd.name)
		p := pttl(t, rc, k.fence)
		assert.True(t, p > day-60000 && p <= day, "%s: the clock floor's token: fence pttl %d", kd.name, p)
		k.release(t, rc, kd.release, "a", 1, 0)

		// A counter ahead of the clock: the token comes from INCR.
		do(t, rc, rc.B().Set().Key(k.fence).Value("9000000000000000").Build())
		require.Equal(t, []int64{1, 9000000000000001}, k.try(t, rc, kd.acquire, "b", 1000, true, 5000), kd.name)
		p = pttl(t, rc, k.fence)
		assert.True(t, p > day-60000 && p <= day, "%s: the counter's token: fence pttl %d", kd.name, p)
	}
}
