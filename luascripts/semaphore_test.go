package luascripts_test

import (
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// semAttempt runs the semaphore's acquire of owner for n permits of size
// (flag as attempt's) and returns its reply.
func (k lockKeys) semAttempt(t *testing.T, rc rueidis.Client, owner, flag string, n, size int) []int64 {
	t.Helper()
	args := []string{owner, "60000", flag, "5000", k.wake, "publish", "", "0", strconv.Itoa(n), strconv.Itoa(size)}
	v, err := run(t, rc, luascripts.SemaphoreAcquire, k.acquireKeys(), args).AsIntSlice()
	require.NoError(t, err)
	return v
}

// A release hands the permits it frees to the waiters at the head of the
// queue that fit, in order, and stops at the first that does not: the
// waiters behind it, for fewer, stay queued.
func TestSemaphoreReleaseServesTheHeadInOrder(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "h", "1", 3, 4)[0])
	require.Equal(t, int64(1), k.semAttempt(t, rc, "g", "1", 1, 4)[0])
	for _, w := range []struct {
		owner string
		n     int
	}{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 1}} {
		require.Equal(t, int64(0), k.semAttempt(t, rc, w.owner, "1", w.n, 4)[0], w.owner)
	}
	require.Equal(t, int64(1), k.release(t, rc, luascripts.SemaphoreRelease, "h", 1, 0))
	// 3 freed: a (1) and b (2) fit; c (3) does not, and d waits behind it.
	assert.Equal(t, []string{"c", "d"}, k.owners(t, rc))
	used, err := rc.Do(t.Context(), rc.B().Hget().Key(k.lock).Field("used").Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(4), used)
	// A granted waiter's attempt takes its grant up.
	got := k.semAttempt(t, rc, "b", "1", 2, 4)
	assert.Equal(t, int64(1), got[0])
}

// A force unlock of a semaphore tells each holder it lost its permits, by
// name, and no waiter: a queued waiter's "want:" field is no holder.
func TestSemaphoreForceUnlockTellsHoldersOnly(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.Equal(t, int64(1), k.semAttempt(t, rc, "c1:1", "1", 2, 3)[0])
	require.Equal(t, int64(1), k.semAttempt(t, rc, "c2:1", "1", 1, 3)[0])
	require.Equal(t, int64(0), k.semAttempt(t, rc, "c3:1", "1", 2, 3)[0], "queued: wants 2 of the none left")
	require.NoError(t, rc.Do(t.Context(), rc.B().ConfigResetstat().Build()).Error())
	n, err := run(t, rc, luascripts.ForceUnlock, []string{k.lock, k.readers, k.gone}, []string{k.wake, "publish", "0"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, int64(3), commandStats(t, rc)["publish"], "the broadcast and one notice per holder, none for the waiter")
}

// A holder whose client label begins with "want:" (labels may hold a ':')
// is told of a force unlock like any other: only a semaphore's hash has
// waiters' "want:" fields.
func TestForceUnlockTellsAHolderLabelledWant(t *testing.T) {
	rc := redistest.New(t).Client(t)
	k := keysFor(t, rc)
	require.NoError(t, rc.Do(t.Context(), rc.B().Hset().Key(k.lock).FieldValue().FieldValue("want:pod@x:1", "1").Build()).Error())
	require.NoError(t, rc.Do(t.Context(), rc.B().ConfigResetstat().Build()).Error())
	n, err := run(t, rc, luascripts.ForceUnlock, []string{k.lock, k.readers, k.gone}, []string{k.wake, "publish", "0"}).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	assert.Equal(t, int64(2), commandStats(t, rc)["publish"], "the broadcast and the holder's notice")
}
