package relock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// A release, and the subscription's confirmation, that land while a waiter
// is joining its first subscription still wake it: it takes its wake-up
// signal before it asks whether the subscription is live.
func TestFirstWaitMissesNoWakeUp(t *testing.T) {
	srv := redistest.Shared(t)
	holder := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	m := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	held, err := holder.Lock(ctx) // a 30s lease: the waiter's fallback timer is its 5s cap
	require.NoError(t, err)

	released := make(chan struct{})
	restore := relock.SetJoinedHook(func() {
		select {
		case <-released:
			return
		default:
		}
		if err := held.Unlock(); err != nil {
			t.Error(err)
		}
		close(released)
		// Let the subscription's confirmation and the release's wake-up
		// arrive while the waiter is between its two steps.
		time.Sleep(200 * time.Millisecond)
	})
	defer restore()
	start := time.Now()
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	waited := time.Since(start)
	require.NoError(t, l.Unlock())
	select {
	case <-released:
	default:
		t.Fatal("the waiter never joined a subscription: the test did not test anything")
	}
	// The fallback would have been the 5s cap; a woken waiter retries at once.
	assert.Less(t, waited, 3*time.Second, "the waiter slept through the release")
}

// Lock returns soon after its ctx ends, whatever Redis does: here Redis is
// paused, so the attempt gets no reply, and its cleanup cannot reach Redis
// either.
func TestLockKeepsItsDeadlineWhenRedisHangs(t *testing.T) {
	srv := redistest.New(t)
	for _, tc := range []struct {
		kind string
		lock func(*relock.Client, string) relock.Locker
	}{
		{"mutex", func(c *relock.Client, n string) relock.Locker { return mutex.New(c, n) }},
		{"reentrant", func(c *relock.Client, n string) relock.Locker { return reentrant.New(c, n) }},
		{"fair", func(c *relock.Client, n string) relock.Locker { return fair.New(c, n) }},
		{"rwlock", func(c *relock.Client, n string) relock.Locker { return rwlock.New(c, n).Locker() }},
	} {
		for _, inAttempt := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/in attempt %v", tc.kind, inAttempt), func(t *testing.T) {
				holder := locktest.Client(t, srv.Client(t))
				c := locktest.Client(t, srv.Client(t))
				m := tc.lock(c, t.Name())
				held, err := tc.lock(holder, t.Name()).Lock(context.Background())
				require.NoError(t, err)
				_, err = m.TryLock(context.Background()) // loads the scripts
				require.ErrorIs(t, err, relock.ErrNotAcquired)
				const deadline = 300 * time.Millisecond
				if inAttempt {
					srv.Pause(t) // the attempt will get no reply
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				waiting := make(chan error, 1)
				go func() {
					_, err := m.Lock(ctx)
					waiting <- err
				}()
				if !inAttempt {
					time.Sleep(deadline / 3) // let it wait, then stop Redis answering
					srv.Pause(t)
				}
				var lockErr error
				select {
				case lockErr = <-waiting:
				case <-time.After(10 * time.Second):
					srv.Resume(t)
					t.Fatal("Lock did not return 10s after its ctx ended")
				}
				took := time.Since(start)
				srv.Resume(t)
				assert.ErrorIs(t, lockErr, context.DeadlineExceeded)
				// Generous for a loaded machine; the old engine overran by a
				// whole synchronous cleanup (1s, and 2s for fair).
				assert.Less(t, took, deadline+700*time.Millisecond, "Lock overran its ctx")
				require.NoError(t, held.Unlock())
			})
		}
	}
}

// A closed rueidis client is final: Lock fails at once with ErrClosed
// instead of retrying until its ctx ends.
func TestLockOnClosedRedisClient(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, l := range []relock.Locker{mutex.New(c, t.Name()), fair.New(c, t.Name())} {
		_, err := l.Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrClosed)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "it did not wait for ctx: %v", err)
		_, err = l.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrClosed)
	}
}

// Nothing handed to users reaches the engine behind a lock: a Locker has
// the methods of its kind and no more.
func TestLockersExposeNoEngine(t *testing.T) {
	c := locktest.Client(t, redistest.Shared(t).Client(t))
	rw := rwlock.New(c, t.Name())
	for _, l := range []relock.Locker{mutex.New(c, t.Name()), reentrant.New(c, t.Name()), fair.New(c, t.Name()), rw.RLocker(), rw.Locker()} {
		_, redis := l.(interface{ Redis() rueidis.Client })
		_, acquire := l.(interface {
			Acquire(context.Context, bool) (*relock.Lease, error)
		})
		assert.False(t, redis || acquire, "%T exposes the engine", l)
	}
}
