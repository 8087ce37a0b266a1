package luascripts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

const goneMs = 60000

// An owner whose caller gave up with its acquire unanswered is recorded as
// gone by the release that cleans up for it; the acquire, landing late, is
// refused and leaves no trace: no hold, no queue entry, no waiting writer.
func TestGoneOwnerIsRefusedAndLeavesNoTrace(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for _, kd := range kinds {
		k := keysFor(t, rc, kd.name)

		// Held by another owner: a Lock's attempt would queue "a".
		require.Equal(t, int64(1), k.try(t, rc, kd.acquire, "h", 60000, true, 5000)[0], kd.name)
		before, err := do(t, rc, rc.B().Dump().Key(k.lock).Build()).ToString()
		require.NoError(t, err)
		if kd.queues {
			require.Equal(t, int64(0), k.try(t, rc, kd.acquire, "a", 60000, true, 5000)[0], kd.name)
			_, queued := k.waiting(t, rc, "a")
			require.True(t, queued, "%s: a waits", kd.name)
		}
		before2 := serverMicros(t, rc) / 1000
		assert.Equal(t, int64(0), k.release(t, rc, kd.release, "a", 1, goneMs), "%s: a held nothing", kd.name)
		score, ok := zscore(t, rc, k.gone, "a")
		require.True(t, ok, "%s: a is recorded as gone", kd.name)
		assert.GreaterOrEqual(t, score, before2+goneMs, kd.name)
		assert.Greater(t, pttl(t, rc, k.gone), int64(goneMs/2), "%s: the gone key expires", kd.name)
		_, queued := k.waiting(t, rc, "a")
		assert.False(t, queued, "%s: the release withdrew the waiter", kd.name)

		assert.Equal(t, []int64{0, -1}, k.try(t, rc, kd.acquire, "a", 60000, true, 5000), "%s: held: a late attempt is refused", kd.name)
		_, queued = k.waiting(t, rc, "a")
		assert.False(t, queued, "%s: a late attempt does not wait", kd.name)
		assert.False(t, exists(t, rc, k.queue), "%s: nor queue", kd.name)
		after, err := do(t, rc, rc.B().Dump().Key(k.lock).Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s: the holder is untouched", kd.name)

		// Free: a late attempt takes nothing either.
		require.Equal(t, int64(1), k.release(t, rc, kd.release, "h", 1, 0), kd.name)
		require.False(t, exists(t, rc, k.lock), kd.name)
		assert.Equal(t, []int64{0, -1}, k.try(t, rc, kd.acquire, "a", 60000, true, 5000), "%s: free: a late attempt is refused", kd.name)
		assert.Equal(t, []int64{0, -1}, k.try(t, rc, kd.acquire, "a", 60000, false, 5000), "%s: and a late TryLock", kd.name)
		for _, key := range []string{k.lock, k.queue, k.readers} {
			assert.False(t, exists(t, rc, key), "%s: %s is absent", kd.name, key)
		}

		// Others are not affected.
		assert.Equal(t, int64(1), k.try(t, rc, kd.acquire, "c", 60000, true, 5000)[0], "%s: another owner acquires", kd.name)
		assert.Equal(t, int64(1), k.release(t, rc, kd.release, "c", 1, 0), kd.name)
	}
}

// A holder abandoned with gone set is released and recorded.
func TestGoneReleaseStillReleases(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for _, kd := range kinds {
		k := keysFor(t, rc, kd.name)
		require.Equal(t, int64(1), k.try(t, rc, kd.acquire, "a", 60000, true, 5000)[0], kd.name)
		assert.Equal(t, int64(1), k.release(t, rc, kd.release, "a", 1, goneMs), kd.name)
		assert.False(t, exists(t, rc, k.lock), "%s: released", kd.name)
		_, ok := zscore(t, rc, k.gone, "a")
		assert.True(t, ok, "%s: and recorded as gone", kd.name)
		assert.Equal(t, []int64{0, -1}, k.try(t, rc, kd.acquire, "a", 60000, true, 5000), kd.name)
		assert.False(t, exists(t, rc, k.lock), kd.name)
	}
}

// A normal release ("0") writes nothing to the gone key, whether it ends a
// hold or withdraws a waiter.
func TestNormalReleaseRecordsNothing(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for _, kd := range kinds {
		k := keysFor(t, rc, kd.name)
		require.Equal(t, int64(1), k.try(t, rc, kd.acquire, "h", 60000, true, 5000)[0], kd.name)
		k.try(t, rc, kd.acquire, "a", 60000, true, 5000)
		k.release(t, rc, kd.release, "a", 1, 0)
		assert.Equal(t, int64(1), k.release(t, rc, kd.release, "h", 1, 0), kd.name)
		assert.False(t, exists(t, rc, k.gone), "%s: no gone key", kd.name)
		assert.Equal(t, int64(1), k.try(t, rc, kd.acquire, "h", 60000, true, 5000)[0], "%s: the owner may acquire again", kd.name)
	}
}

// Gone entries end at their time: the owner is no longer refused, later
// records trim them, and the key's expiry is extended, never shortened.
func TestGoneEntriesExpire(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	ctx := context.Background()
	k := keysFor(t, rc)
	const short = 200

	k.release(t, rc, luascripts.MutexRelease, "a", 1, short)
	p := pttl(t, rc, k.gone)
	assert.True(t, p > 0 && p <= short, "the gone key expires with its entry: pttl %d", p)
	eventually(t, "a's entry to end", func() bool {
		v := k.try(t, rc, luascripts.MutexAcquire, "a", 60000, false, 5000)
		return v[0] == 1
	})
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k.lock).Build()).Error())

	k.release(t, rc, luascripts.MutexRelease, "x", 1, goneMs)
	k.release(t, rc, luascripts.MutexRelease, "y", 1, short)
	assert.Greater(t, pttl(t, rc, k.gone), int64(goneMs/2), "a short record does not shorten the key's expiry")
	yEnd, ok := zscore(t, rc, k.gone, "y")
	require.True(t, ok)
	eventually(t, "y's entry to end", func() bool { return serverMicros(t, rc)/1000 > yEnd })
	k.release(t, rc, luascripts.MutexRelease, "z", 1, goneMs)
	_, ok = zscore(t, rc, k.gone, "y")
	assert.False(t, ok, "an ended entry is trimmed")
	_, ok = zscore(t, rc, k.gone, "x")
	assert.True(t, ok, "a live entry stays")
}
