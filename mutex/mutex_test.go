package mutex_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/internal/roundtrip"
	"github.com/relockgo/relock/mutex"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func key(name string) string { return "relock:{" + name + "}" }

func TestLockUnlockRoundTrips(t *testing.T) {
	rc := roundtrip.New(redistest.Shared(t).Client(t))
	c := locktest.Client(t, rc)
	m := mutex.New(c, t.Name())
	ctx := context.Background()

	// The first use of a script on a server costs one more round trip
	// (EVALSHA answered NOSCRIPT, then EVAL); measure the steady state.
	warm, err := m.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, warm.Unlock())

	rc.Reset()
	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rc.Reset(), "an uncontended Lock is one round trip")
	require.NoError(t, lease.Unlock())
	assert.Equal(t, int64(1), rc.Reset(), "Unlock is one round trip")
}

func TestTryLockHeld(t *testing.T) {
	srv := redistest.Shared(t)
	rc := roundtrip.New(srv.Client(t))
	c := locktest.Client(t, rc)
	ctx := context.Background()
	holder, err := mutex.New(c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	defer holder.Unlock()

	rc2 := roundtrip.New(srv.Client(t))
	other := locktest.Client(t, rc2)
	lease, err := mutex.New(other, t.Name()).TryLock(ctx)
	assert.Nil(t, lease)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.Equal(t, int64(1), rc2.Count(), "TryLock on a held mutex is one round trip")
}

func TestFencingTokensIncreaseInGrantOrder(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	m := mutex.New(c, t.Name())
	ctx := context.Background()

	var (
		mu     sync.Mutex
		tokens []int64
		inside atomic.Int32
		wg     sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				lease, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				mu.Lock()
				tokens = append(tokens, lease.Token())
				mu.Unlock()
				inside.Add(-1)
				if err := lease.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, tokens, 200)
	for i := 1; i < len(tokens); i++ {
		assert.Greater(t, tokens[i], tokens[i-1], "grant %d", i)
	}
}

func TestReentryWouldDeadlock(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	m := mutex.New(c, t.Name())
	lease, err := m.Lock(context.Background())
	require.NoError(t, err)

	for _, f := range []func(context.Context) (*relock.Lease, error){m.Lock, m.TryLock} {
		again, err := f(lease.Context())
		assert.Nil(t, again)
		assert.ErrorIs(t, err, relock.ErrWouldDeadlock)
	}
	// Another mutex in the same call chain is fine.
	inner, err := mutex.New(c, t.Name()+"/inner").Lock(lease.Context())
	require.NoError(t, err)
	require.NoError(t, inner.Unlock())
	require.NoError(t, lease.Unlock())

	// Once unlocked, the chain owns nothing: a ctx kept from it may lock again.
	kept := context.WithoutCancel(lease.Context())
	again, err := m.Lock(kept)
	require.NoError(t, err)
	require.NoError(t, again.Unlock())
}

func TestCancelWhileWaiting(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	holder, err := mutex.New(c, name).Lock(context.Background())
	require.NoError(t, err)
	defer holder.Unlock()

	waiter := locktest.Client(t, srv.Client(t))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		lease, err := mutex.New(waiter, name).Lock(ctx)
		if lease != nil {
			lease.Unlock()
		}
		errc <- err
	}()
	channel := key(name) + ":wake"
	numsub := func() int64 {
		v, err := rc.Do(context.Background(), rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
		require.NoError(t, err)
		return v[channel]
	}
	locktest.Eventually(t, "the waiter to subscribe", func() bool { return numsub() == 1 })
	cancel()
	err = <-errc
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the lock was held: both are reported")
	locktest.Eventually(t, "the subscription to end", func() bool { return numsub() == 0 })
}

func TestWaitersShareOneSubscription(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	m := mutex.New(c, name)
	holder, err := m.Lock(context.Background())
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := m.Lock(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			lease.Unlock()
		}()
	}
	channel := key(name) + ":wake"
	var subs int64
	locktest.Eventually(t, "the waiters to subscribe", func() bool {
		v, err := rc.Do(context.Background(), rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
		require.NoError(t, err)
		subs = v[channel]
		return subs >= 1
	})
	assert.Equal(t, int64(1), subs, "one subscription per lock per Client")
	require.NoError(t, holder.Unlock())
	wg.Wait()
}

func TestWaiterAcquiresAfterPubSubConnectionKilled(t *testing.T) {
	srv := redistest.New(t)
	admin := srv.Client(t)
	name := t.Name()
	holderClient := locktest.Client(t, srv.Client(t))
	holder, err := mutex.New(holderClient, name).Lock(context.Background())
	require.NoError(t, err)

	waiter := locktest.Client(t, srv.Client(t))
	got := make(chan error, 1)
	go func() {
		lease, err := mutex.New(waiter, name).Lock(context.Background())
		if err == nil {
			err = lease.Unlock()
		}
		got <- err
	}()
	channel := key(name) + ":wake"
	locktest.Eventually(t, "the waiter to subscribe", func() bool {
		v, _ := admin.Do(context.Background(), admin.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
		return v[channel] == 1
	})
	require.NoError(t, admin.Do(context.Background(), admin.B().ClientKill().TypePubsub().Build()).Error())
	require.NoError(t, holder.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not acquire after release")
	}
}

func TestIsLockedAndForceUnlock(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc, relock.WithWatchdogTimeout(300*time.Millisecond))
	m := mutex.New(c, t.Name())
	ctx := context.Background()

	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, forced, "nothing to force")

	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	locked, err = m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)

	forced, err = m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced)
	select {
	case <-lease.Context().Done():
		assert.ErrorIs(t, context.Cause(lease.Context()), relock.ErrLockLost, "the holder learns at its next renewal")
	case <-time.After(20 * time.Second):
		t.Fatal("the forced-out holder's lease did not end")
	}
	assert.ErrorIs(t, lease.Unlock(), relock.ErrLockLost)
}

func TestUnlockTwice(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	lease, err := mutex.New(c, t.Name()).Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, lease.Unlock())
	assert.ErrorIs(t, lease.Unlock(), relock.ErrNotHeld)
	var none *relock.Lease
	assert.ErrorIs(t, none.Unlock(), relock.ErrNotHeld)
	<-lease.Context().Done()
	assert.ErrorIs(t, context.Cause(lease.Context()), context.Canceled)
}

func TestWatchdogKeepsLeaseAlive(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	const timeout = 200 * time.Millisecond
	c := locktest.Client(t, rc, relock.WithWatchdogTimeout(timeout))
	m := mutex.New(c, t.Name())
	lease, err := m.Lock(context.Background())
	require.NoError(t, err)

	start := time.Now()
	for time.Since(start) < 5*timeout {
		select {
		case <-lease.Context().Done():
			t.Fatalf("lease lost after %v: %v", time.Since(start), context.Cause(lease.Context()))
		case <-time.After(timeout / 4):
		}
	}
	assert.True(t, time.Now().Before(lease.ValidUntil()), "renewals keep ValidUntil ahead")
	assert.True(t, lease.ValidUntil().Before(time.Now().Add(timeout)), "ValidUntil is within one lease")
	pttl, err := rc.Do(context.Background(), rc.B().Pttl().Key(key(t.Name())).Build()).AsInt64()
	require.NoError(t, err)
	assert.Greater(t, pttl, int64(0))
	require.NoError(t, lease.Unlock())
}

func TestFixedLeaseExpires(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	const lease = 300 * time.Millisecond
	m := mutex.New(c, t.Name(), relock.WithLease(lease))
	before := time.Now()
	l, err := m.Lock(context.Background())
	require.NoError(t, err)
	assert.True(t, l.ValidUntil().After(before), "valid for a while")
	assert.False(t, l.ValidUntil().After(before.Add(lease)), "never past the lease")

	select {
	case <-l.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("a fixed lease did not end")
	}
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
	assert.False(t, time.Now().Before(l.ValidUntil()), "the lease ends at its validity, not before")
	locktest.Eventually(t, "the key to expire", func() bool {
		n, err := rc.Do(context.Background(), rc.B().Exists().Key(key(t.Name())).Build()).AsInt64()
		return err == nil && n == 0
	})
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)

	// And the next owner gets it.
	next, err := m.TryLock(context.Background())
	require.NoError(t, err)
	assert.Greater(t, next.Token(), l.Token())
	require.NoError(t, next.Unlock())
}

func TestTokensSurviveRestartWithoutPersistence(t *testing.T) {
	srv := redistest.New(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	m := mutex.New(c, t.Name())
	ctx := context.Background()

	var last int64
	for range 3 {
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		last = lease.Token()
		require.NoError(t, lease.Unlock())
	}
	srv.Restart(t)
	n, err := rc.Do(ctx, rc.B().Exists().Key(key(t.Name())+":fence").Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(0), n, "the restart forgot the counter")

	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.Greater(t, lease.Token(), last)
	require.NoError(t, lease.Unlock())
}

func TestRedisDown(t *testing.T) {
	srv := redistest.New(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	m := mutex.New(c, t.Name())
	srv.Stop(t)

	_, err := m.TryLock(context.Background())
	require.Error(t, err, "TryLock reports the network error")
	assert.False(t, errors.Is(err, relock.ErrNotAcquired), "a Redis failure is not 'held by another': %v", err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = m.Lock(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Lock waits out the outage until ctx ends")
	assert.False(t, errors.Is(err, relock.ErrNotAcquired), "a Redis failure is not 'held by another': %v", err)

	// A Lock waiting through the outage acquires once Redis is back.
	got := make(chan error, 1)
	go func() {
		lease, err := m.Lock(context.Background())
		if err == nil {
			err = lease.Unlock()
		}
		got <- err
	}()
	srv.Start(t)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Lock did not acquire after Redis came back")
	}
}

// A waiter that loses every race to newcomers is not starved: once it has
// waited a while it queues, and newcomers wait behind it.
func TestNoStarvation(t *testing.T) {
	srv := redistest.Shared(t)
	locktest.NoStarvation(t, srv.Addr(), srv.Client(t), func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return mutex.New(c, name, opts...)
	})
}

// Every waiter of a hot mutex gets turns: a waiter that has not starved
// yet when a queue forms is not left asleep while the queue cycles.
func TestEveryWaiterServed(t *testing.T) {
	srv := redistest.Shared(t)
	locktest.EveryWaiterServed(t, srv.Client(t), srv.Client(t), func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return mutex.New(c, name, opts...)
	})
}
