package reentrant_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/reentrant"
)

// serverMillis is the server's clock, the one that expires keys.
func serverMillis(t *testing.T, rc rueidis.Client) int64 {
	t.Helper()
	v, err := rc.Do(context.Background(), rc.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	s, _ := strconv.ParseInt(v[0], 10, 64)
	us, _ := strconv.ParseInt(v[1], 10, 64)
	return s*1000 + us/1000
}

// A hold taken with the watchdog's lease, re-entered down the call chain
// through a lock value with a much shorter fixed lease, stays held: the
// re-entry never shortens the hold's expiry, so no other Client takes the
// lock while the first lease's Context is live.
func TestReentryWithShorterLeaseKeepsTheHold(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	other := locktest.Client(t, srv.Client(t))
	name := t.Name()
	key := luascripts.NewKeys("relock", name).Lock
	const short = 100 * time.Millisecond

	outer, err := reentrant.New(c, name).Lock(context.Background())
	require.NoError(t, err)
	defer outer.Unlock()
	inner, err := reentrant.New(c, name, relock.WithLease(short)).Lock(outer.Context())
	require.NoError(t, err)
	defer inner.Unlock()

	// Let the server's clock pass the short lease, with room to spare.
	past := serverMillis(t, rc) + 3*short.Milliseconds()
	locktest.Eventually(t, "the short lease to pass on the server", func() bool { return serverMillis(t, rc) > past })

	require.NoError(t, context.Cause(outer.Context()), "the hold is live")
	assert.True(t, time.Now().Before(outer.ValidUntil()))
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, pttl, int64(5000), "the lock keeps the hold's expiry")
	taken, err := reentrant.New(other, name).TryLock(context.Background())
	if err == nil {
		taken.Unlock() // the bug: do not leave it held
	}
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "another Client cannot take a live hold")
}
