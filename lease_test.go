package relock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

func TestExtend(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	ctx := context.Background()
	for _, tc := range []struct {
		kind string
		lock func(string, ...relock.LockOption) relock.Locker
	}{
		{"mutex", func(n string, o ...relock.LockOption) relock.Locker { return mutex.New(c, n, o...) }},
		{"reentrant", func(n string, o ...relock.LockOption) relock.Locker { return reentrant.New(c, n, o...) }},
		{"rwlock", func(n string, o ...relock.LockOption) relock.Locker { return rwlock.New(c, n, o...).RLocker() }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := t.Name()
			key := luascripts.NewKeys(relock.DefaultKeyPrefix, name).Lock
			pttl := func() int64 {
				n, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
				require.NoError(t, err)
				return n
			}
			l, err := tc.lock(name, relock.WithLease(300*time.Millisecond)).Lock(ctx)
			require.NoError(t, err)
			before := l.ValidUntil()
			require.NoError(t, l.Extend(ctx, 10*time.Second))
			assert.Greater(t, pttl(), int64(5000), "extended in Redis")
			assert.True(t, l.ValidUntil().After(before.Add(5*time.Second)), "ValidUntil moved forward")
			require.NoError(t, l.Extend(ctx, 50*time.Millisecond))
			assert.Greater(t, pttl(), int64(5000), "Extend never shortens")
			time.Sleep(400 * time.Millisecond) // past the original lease
			require.NoError(t, l.Context().Err(), "held past its original lease")
			assert.ErrorIs(t, l.Extend(ctx, time.Millisecond), relock.ErrInvalid, "below MinLease")

			_, err = mutex.New(c, name).ForceUnlock(ctx)
			require.NoError(t, err)
			assert.ErrorIs(t, l.Extend(ctx, time.Second), relock.ErrLockLost)
			assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
			assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
			assert.ErrorIs(t, l.Extend(ctx, time.Second), relock.ErrNotHeld)

			w, err := tc.lock(name).Lock(ctx)
			require.NoError(t, err)
			assert.ErrorIs(t, w.Extend(ctx, time.Second), relock.ErrInvalid, "the watchdog renews it")
			require.NoError(t, w.Unlock())
		})
	}
}

// While the watchdog is ending a hold whose validity passed (Redis still
// has it: its renewals were only late), a re-entry and an Extend report
// the loss: never a nil lease with a nil error, never a nil Extend that
// left ValidUntil in the past.
func TestCallsWhileAHoldIsBeingLostReportTheLoss(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	m := reentrant.New(c, t.Name(), relock.WithLease(lease))
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	key := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()).Lock
	require.NoError(t, rc.Do(ctx, rc.B().Pexpire().Key(key).Milliseconds(30000).Build()).Error()) // Redis keeps it

	entered, release := make(chan struct{}), make(chan struct{})
	restore := relock.SetLostHook(func() {
		close(entered)
		<-release
	})
	defer restore()
	select {
	case <-entered: // the watchdog found the validity passed and is ending the hold
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog never ended the lease")
	}
	type result struct {
		l   *relock.Lease
		err error
	}
	reentered, extended := make(chan result, 1), make(chan error, 1)
	go func() {
		r, err := m.Lock(l.Context())
		reentered <- result{r, err}
	}()
	go func() { extended <- l.Extend(ctx, time.Minute) }()
	time.Sleep(100 * time.Millisecond) // both reach the hold that is being lost
	close(release)
	r := <-reentered
	assert.Nil(t, r.l)
	assert.ErrorIs(t, r.err, relock.ErrLockLost, "re-entry while the hold was being lost")
	assert.ErrorIs(t, <-extended, relock.ErrLockLost, "Extend while the hold was being lost")
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
}

// An Extend that reports the loss of a hold, found ended by a loss
// notice whose ending of the hold has not finished yet (the stop hook
// holds it there), finds every Context of the hold done with that cause:
// a caller told of the loss by Extend never goes on under a live Context.
func TestExtendThatReportsALossFindsTheContextsDone(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	ctx := context.Background()
	m := reentrant.New(c, t.Name(), relock.WithLease(time.Minute))
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	r, err := m.Lock(l.Context()) // a re-entry: a lease of its own
	require.NoError(t, err)

	entered, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	restore := relock.SetStopHook(func() {
		first.Do(func() {
			close(entered)
			<-release
		})
	})
	defer restore()
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce() // before Close, which waits for the notice's goroutine

	locktest.Eventually(t, "the Client to hear loss notices", c.Listening)
	forced, err := mutex.New(c, t.Name()).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)
	select {
	case <-entered: // the loss notice is ending the hold
	case <-time.After(10 * time.Second):
		t.Fatal("the loss notice never ended the hold")
	}
	assert.ErrorIs(t, l.Extend(ctx, time.Minute), relock.ErrLockLost)
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost, "the Lock's lease, once Extend reported the loss")
	assert.ErrorIs(t, context.Cause(r.Context()), relock.ErrLockLost, "the re-entry's lease, once Extend reported the loss")
	releaseOnce()
	assert.ErrorIs(t, r.Unlock(), relock.ErrLockLost)
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
}
