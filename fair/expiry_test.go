package fair_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
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
// re-entry never shortens the hold's expiry.
func TestReentryWithShorterLeaseKeepsTheHold(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	other := locktest.Client(t, srv.Client(t))
	name := t.Name()
	key := luascripts.NewKeys("relock", name).Lock
	const short = 100 * time.Millisecond

	outer, err := fair.New(c, name).Lock(context.Background())
	require.NoError(t, err)
	defer outer.Unlock()
	inner, err := fair.New(c, name, relock.WithLease(short)).Lock(outer.Context())
	require.NoError(t, err)
	defer inner.Unlock()

	past := serverMillis(t, rc) + 3*short.Milliseconds()
	locktest.Eventually(t, "the short lease to pass on the server", func() bool { return serverMillis(t, rc) > past })

	require.NoError(t, context.Cause(outer.Context()), "the hold is live")
	assert.True(t, time.Now().Before(outer.ValidUntil()))
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, pttl, int64(5000), "the lock keeps the hold's expiry")
	taken, err := fair.New(other, name).TryLock(context.Background())
	if err == nil {
		taken.Unlock() // the bug: do not leave it held
	}
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "another Client cannot take a live hold")
}

// Holders whose fixed leases expire without an Unlock hand the lock on as
// promptly as an Unlock would, in arrival order: each waiter is granted
// about a lease after the previous one, never after a stall until some
// waiter's deadline.
func TestExpiredLeasesHandOnInOrder(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	clients := []*relock.Client{locktest.Client(t, srv.Client(t)), locktest.Client(t, srv.Client(t))}
	name := t.Name()
	queue := luascripts.NewKeys("relock", name).Queue
	const (
		n     = 8
		lease = time.Second
		// gap bounds the time between consecutive grants: a lease plus a
		// loaded machine's delays. A waiter that misses the hand-on sleeps
		// until a waiter's deadline, 3 s or more later.
		gap = 2 * time.Second
	)
	queueLen := func() int64 {
		return llen(t, rc, queue)
	}

	holder, err := fair.New(clients[0], name).Lock(context.Background())
	require.NoError(t, err)
	type grant struct {
		i     int
		at    time.Time
		token int64
		err   error
	}
	grants := make(chan grant, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		go func() {
			lease, err := fair.New(clients[i%2], name, relock.WithLease(lease)).Lock(ctx)
			g := grant{i: i, at: time.Now(), err: err}
			if err == nil {
				g.token = lease.Token() // never unlocked: the lease expires
			}
			grants <- g
		}()
		locktest.Eventually(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool { return queueLen() == int64(i+1) })
	}
	start := time.Now()
	require.NoError(t, holder.Unlock())

	prev := grant{i: -1, at: start}
	for range n {
		var g grant
		select {
		case g = <-grants:
		case <-time.After(time.Duration(n) * gap):
			t.Fatalf("waiter %d not granted within %v of waiter %d", prev.i+1, time.Duration(n)*gap, prev.i)
		}
		require.NoError(t, g.err, "waiter %d", g.i)
		assert.Equal(t, prev.i+1, g.i, "grants follow arrival order")
		assert.Less(t, g.at.Sub(prev.at), gap, "waiter %d granted %v after waiter %d", g.i, g.at.Sub(prev.at), prev.i)
		assert.Greater(t, g.token, prev.token, "tokens increase")
		prev = g
	}
	assert.Less(t, prev.at.Sub(start), time.Duration(n)*gap, "all %d granted", n)
}
