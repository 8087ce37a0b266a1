package reentrant_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/reentrant"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func holdCount(t *testing.T, m *reentrant.Mutex, ctx context.Context) int {
	t.Helper()
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	return n
}

func TestNestedCallChain(t *testing.T) {
	srv := redistest.Shared(t)
	c := locktest.Client(t, srv.Client(t))
	other := reentrant.New(locktest.Client(t, srv.Client(t)), t.Name())
	m := reentrant.New(c, t.Name())
	ctx := context.Background()

	assert.Equal(t, 0, holdCount(t, m, ctx), "a ctx without the lock holds nothing")
	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	middle, err := m.Lock(outer.Context())
	require.NoError(t, err)

	// Ownership is the ctx, not the goroutine.
	innerc := make(chan *relock.Lease)
	go func() {
		inner, err := m.TryLock(middle.Context())
		if err != nil {
			t.Error(err)
		}
		innerc <- inner
	}()
	inner := <-innerc
	require.NotNil(t, inner)

	assert.Equal(t, outer.Token(), middle.Token(), "re-entries share the token")
	assert.Equal(t, outer.Token(), inner.Token())
	assert.Equal(t, 3, holdCount(t, m, inner.Context()))
	assert.Equal(t, 3, holdCount(t, m, outer.Context()), "the count is the owner's, whichever lease asks")

	for i, l := range []*relock.Lease{inner, middle} {
		_, err := other.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrNotAcquired, "held while %d holds remain", 3-i)
		require.NoError(t, l.Unlock())
		assert.Equal(t, 2-i, holdCount(t, m, outer.Context()))
		assert.ErrorIs(t, context.Cause(l.Context()), context.Canceled, "an unlocked lease's Context is done")
		assert.NoError(t, outer.Context().Err(), "the outer lease is still held")
	}
	_, err = other.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	require.NoError(t, outer.Unlock())
	assert.Equal(t, 0, holdCount(t, m, outer.Context()))

	l, err := other.TryLock(ctx)
	require.NoError(t, err, "another owner acquires after the last Unlock")
	assert.Greater(t, l.Token(), outer.Token())
	require.NoError(t, l.Unlock())
}

func TestReentryRoundTripAndLeaseRefresh(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	const lease = 2 * time.Second
	m := reentrant.New(c, t.Name(), relock.WithLease(lease))
	outer, err := m.Lock(context.Background())
	require.NoError(t, err)
	defer outer.Unlock()
	first := outer.ValidUntil()

	key := "relock:{" + t.Name() + "}"
	require.NoError(t, rc.Do(context.Background(), rc.B().Pexpire().Key(key).Milliseconds(500).Build()).Error())
	inner, err := m.Lock(outer.Context())
	require.NoError(t, err)
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, pttl, int64(1000), "re-entry refreshes the lease")
	assert.LessOrEqual(t, pttl, lease.Milliseconds(), "to its configured length, never beyond")
	assert.False(t, outer.ValidUntil().Before(first), "ValidUntil never moves back")
	assert.Equal(t, outer.ValidUntil(), inner.ValidUntil(), "leases of a hold share its validity")
	require.NoError(t, inner.Unlock())
}

func TestOuterUnlockFirstKeepsTheLock(t *testing.T) {
	srv := redistest.Shared(t)
	c := locktest.Client(t, srv.Client(t))
	other := reentrant.New(locktest.Client(t, srv.Client(t)), t.Name())
	m := reentrant.New(c, t.Name())
	outer, err := m.Lock(context.Background())
	require.NoError(t, err)
	inner, err := m.Lock(outer.Context())
	require.NoError(t, err)

	require.NoError(t, outer.Unlock(), "leases of a hold unlock in any order")
	assert.ErrorIs(t, context.Cause(outer.Context()), context.Canceled)
	assert.NoError(t, inner.Context().Err(), "the inner lease is still held")
	assert.Equal(t, 1, holdCount(t, m, inner.Context()))
	_, err = other.TryLock(context.Background())
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "held until its last lease is unlocked")

	again, err := m.Lock(inner.Context())
	require.NoError(t, err, "the hold can still be re-entered through a live lease")
	assert.Equal(t, outer.Token(), again.Token())
	require.NoError(t, inner.Unlock())
	require.NoError(t, again.Unlock())
	assert.ErrorIs(t, outer.Unlock(), relock.ErrNotHeld)
	assert.ErrorIs(t, inner.Unlock(), relock.ErrNotHeld)
	l, err := other.TryLock(context.Background())
	require.NoError(t, err, "released with the last lease")
	require.NoError(t, l.Unlock())
}

func TestRetriedReleaseCountsOnce(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	m := reentrant.New(c, t.Name())
	l1, err := m.Lock(context.Background())
	require.NoError(t, err)
	l2, err := m.Lock(l1.Context())
	require.NoError(t, err)
	l3, err := m.Lock(l2.Context())
	require.NoError(t, err)
	require.Equal(t, 3, holdCount(t, m, l1.Context()))

	// An earlier release of depth 3 that was applied but whose reply was
	// lost: the one Unlock sends again must not count down a second time.
	key := "relock:{" + t.Name() + "}"
	owner := ""
	fields, err := rc.Do(context.Background(), rc.B().Hgetall().Key(key).Build()).AsStrMap()
	require.NoError(t, err)
	for f := range fields {
		owner = f
	}
	release := func(depth int) {
		n, err := luascripts.ReleaseCall(luascripts.ReentrantRelease, luascripts.NewKeys("relock", t.Name()), owner, "publish", depth, "0").Exec(context.Background(), rc).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	release(3)
	require.NoError(t, l3.Unlock())
	assert.Equal(t, 2, holdCount(t, m, l1.Context()))
	release(2)
	release(2)
	assert.Equal(t, 1, holdCount(t, m, l1.Context()), "the same release twice counts once")
	require.NoError(t, l2.Unlock())
	assert.Equal(t, 1, holdCount(t, m, l1.Context()))
	require.NoError(t, l1.Unlock())
	assert.Equal(t, 0, holdCount(t, m, l1.Context()))
}

func TestIndependentChainsExclude(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	m := reentrant.New(c, t.Name())
	var (
		inside atomic.Int32
		count  int // guarded by the lock under test
		wg     sync.WaitGroup
	)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				outer, err := m.Lock(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two call chains inside at once")
				}
				inner, err := m.Lock(outer.Context()) // re-entry inside the section
				if err != nil {
					t.Error(err)
					return
				}
				count++
				inside.Add(-1)
				if err := inner.Unlock(); err != nil {
					t.Error(err)
				}
				if err := outer.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 120, count)
}

func TestLostLeaseEndsEveryNestedLease(t *testing.T) {
	c := locktest.Client(t, redistest.Shared(t).Client(t), relock.WithWatchdogTimeout(300*time.Millisecond))
	m := reentrant.New(c, t.Name())
	l1, err := m.Lock(context.Background())
	require.NoError(t, err)
	l2, err := m.Lock(l1.Context())
	require.NoError(t, err)
	l3, err := m.Lock(l2.Context())
	require.NoError(t, err)

	forced, err := m.ForceUnlock(context.Background())
	require.NoError(t, err)
	require.True(t, forced)
	for i, l := range []*relock.Lease{l1, l2, l3} {
		select {
		case <-l.Context().Done():
			assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost, "lease %d", i+1)
		case <-time.After(20 * time.Second):
			t.Fatalf("lease %d did not end", i+1)
		}
	}
	_, err = m.Lock(l3.Context())
	assert.ErrorIs(t, err, relock.ErrLockLost, "re-entering a lost hold reports the loss")
	assert.ErrorIs(t, l3.Unlock(), relock.ErrLockLost)
}

// A waiter that loses every race to newcomers is not starved.
func TestNoStarvation(t *testing.T) {
	srv := redistest.Shared(t)
	locktest.NoStarvation(t, srv.Addr(), srv.Client(t), func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return reentrant.New(c, name, opts...)
	})
}

// Every waiter of a hot reentrant lock gets turns.
func TestEveryWaiterServed(t *testing.T) {
	srv := redistest.Shared(t)
	locktest.EveryWaiterServed(t, srv.Client(t), srv.Client(t), func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return reentrant.New(c, name, opts...)
	})
}
