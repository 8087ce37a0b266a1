package rwlock_test

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
	"github.com/relockgo/relock/rwlock"
)

// serverMillis is the server's clock, the one that expires keys and
// reader deadlines.
func serverMillis(t *testing.T, rc rueidis.Client) int64 {
	t.Helper()
	v, err := rc.Do(context.Background(), rc.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	s, _ := strconv.ParseInt(v[0], 10, 64)
	us, _ := strconv.ParseInt(v[1], 10, 64)
	return s*1000 + us/1000
}

// readerDeadline returns the deadline of the only reader in the readers
// zset key.
func readerDeadline(t *testing.T, rc rueidis.Client, key string) float64 {
	t.Helper()
	v, err := rc.Do(context.Background(), rc.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	require.Len(t, v, 1)
	return v[0].Score
}

func pttl(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// A hold taken with the watchdog's lease, re-entered down the call chain
// through a lock value with a much shorter fixed lease, stays held, on
// either side: the re-entry never shortens the lock's expiry, the reader's
// deadline or the readers' expiry, so no other Client takes the lock while
// the first lease's Context is live.
func TestReentryWithShorterLeaseKeepsTheHold(t *testing.T) {
	for _, side := range []string{"read", "write"} {
		t.Run(side, func(t *testing.T) {
			srv := redistest.Shared(t)
			rc := srv.Client(t)
			c := locktest.Client(t, rc)
			other := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
			name := t.Name()
			k := luascripts.NewKeys("relock", name)
			const short = 100 * time.Millisecond
			lock := func(m *rwlock.RWMutex, ctx context.Context) (*relock.Lease, error) {
				if side == "read" {
					return m.RLock(ctx)
				}
				return m.Lock(ctx)
			}

			outer, err := lock(rwlock.New(c, name), context.Background())
			require.NoError(t, err)
			defer outer.Unlock()
			var before float64
			if side == "read" {
				before = readerDeadline(t, rc, k.Readers)
			}
			inner, err := lock(rwlock.New(c, name, relock.WithLease(short)), outer.Context())
			require.NoError(t, err)
			defer inner.Unlock()
			if side == "read" {
				assert.GreaterOrEqual(t, readerDeadline(t, rc, k.Readers), before, "the reader's deadline does not move earlier")
			}

			past := serverMillis(t, rc) + 3*short.Milliseconds()
			locktest.Eventually(t, "the short lease to pass on the server", func() bool { return serverMillis(t, rc) > past })

			require.NoError(t, context.Cause(outer.Context()), "the hold is live")
			assert.True(t, time.Now().Before(outer.ValidUntil()))
			assert.Greater(t, pttl(t, rc, k.Lock), int64(5000), "the lock keeps the hold's expiry")
			if side == "read" {
				assert.Greater(t, pttl(t, rc, k.Readers), int64(5000), "the readers keep theirs")
			}
			taken, err := other.TryLock(context.Background())
			if err == nil {
				taken.Unlock() // the bug: do not leave it held
			}
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "another Client's writer cannot take a live hold")
		})
	}
}
