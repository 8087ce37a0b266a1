package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/rwlock"
)

func isLocked(t *testing.T, m *rwlock.RWMutex) bool {
	t.Helper()
	locked, err := m.IsLocked(context.Background())
	require.NoError(t, err)
	return locked
}

func holdCount(t *testing.T, m *rwlock.RWMutex, ctx context.Context) int {
	t.Helper()
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	return n
}

func TestIsLockedEitherSide(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	assert.False(t, isLocked(t, m), "free")

	r, err := m.RLock(ctx)
	require.NoError(t, err)
	assert.True(t, isLocked(t, m), "read-locked")
	require.NoError(t, r.Unlock())
	assert.False(t, isLocked(t, m), "free after the last reader")

	w, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.True(t, isLocked(t, m), "write-locked")
	require.NoError(t, w.Unlock())
	assert.False(t, isLocked(t, m), "free after the writer")
}

func TestForceUnlockEndsEveryReader(t *testing.T) {
	srv := redistest.Shared(t)
	opt := relock.WithWatchdogTimeout(300 * time.Millisecond)
	a := rwlock.New(locktest.Client(t, srv.Client(t), opt), t.Name())
	b := rwlock.New(locktest.Client(t, srv.Client(t), opt), t.Name())
	admin := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()

	r1, err := a.RLock(ctx)
	require.NoError(t, err)
	r2, err := b.RLock(ctx)
	require.NoError(t, err)
	forced, err := admin.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced, "it was held")
	assert.False(t, isLocked(t, admin))

	w, err := admin.TryLock(ctx)
	require.NoError(t, err, "a writer may enter at once, before the readers' next renewal")
	for _, r := range []*relock.Lease{r1, r2} {
		select {
		case <-r.Context().Done():
			assert.ErrorIs(t, context.Cause(r.Context()), relock.ErrLockLost)
		case <-time.After(20 * time.Second):
			t.Fatal("a forced-out reader did not learn of it")
		}
		assert.ErrorIs(t, r.Unlock(), relock.ErrLockLost)
	}
	// The forced-out readers' renewals and releases left the writer alone.
	assert.Equal(t, 1, holdCount(t, admin, w.Context()))
	_, err = a.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the writer still excludes readers")
	require.NoError(t, w.Unlock())

	r3, err := a.TryRLock(ctx)
	require.NoError(t, err, "readers come back once the writer left")
	require.NoError(t, r3.Unlock())
	forced, err = admin.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, forced, "it was free")
}

func TestForceUnlockWakesWaitingWriter(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	m := rwlock.New(locktest.Client(t, rc), t.Name())
	ctx := context.Background()
	r, err := m.RLock(ctx)
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		w, err := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name()).Lock(ctx)
		if err == nil {
			err = w.Unlock()
		}
		got <- err
	}()
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{"+t.Name()+"}:queue") == 1
	})
	assert.True(t, isLocked(t, m), "a waiting writer does not free the lock")
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)
	select {
	case err := <-got:
		require.NoError(t, err, "the waiting writer acquired")
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting writer did not acquire after ForceUnlock")
	}
	assert.ErrorIs(t, r.Unlock(), relock.ErrLockLost)
}

func TestHoldCountBothSides(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	assert.Equal(t, 0, holdCount(t, m, ctx), "ctx holds nothing")

	r, err := m.RLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, holdCount(t, m, r.Context()))
	r2, err := m.RLock(r.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, holdCount(t, m, r2.Context()), "read re-entry")
	other, err := m.RLock(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, holdCount(t, m, other.Context()), "another reader counts its own holds")
	assert.Equal(t, 0, holdCount(t, m, ctx))
	require.NoError(t, other.Unlock())
	require.NoError(t, r2.Unlock())
	assert.Equal(t, 1, holdCount(t, m, r.Context()))
	require.NoError(t, r.Unlock())
	assert.Equal(t, 0, holdCount(t, m, r.Context()), "after Unlock")

	w, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, holdCount(t, m, w.Context()))
	w2, err := m.Lock(w.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, holdCount(t, m, w2.Context()), "write re-entry")
	down, err := m.RLock(w2.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, holdCount(t, m, down.Context()), "a downgrade counts both sides")
	assert.Equal(t, 2, holdCount(t, m, w2.Context()), "the write chain alone")
	require.NoError(t, down.Unlock())
	require.NoError(t, w2.Unlock())
	require.NoError(t, w.Unlock())

	// A lost hold counts 0: Redis is the judge.
	lost, err := m.Lock(ctx)
	require.NoError(t, err)
	_, err = m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, holdCount(t, m, lost.Context()))
}

// A mutex of the same name holds the key as a string: a read-write lock
// sees it locked and counts no hold of its own.
func TestAnotherKindHoldsTheName(t *testing.T) {
	c := locktest.Client(t, redistest.Shared(t).Client(t))
	m := rwlock.New(c, t.Name())
	l, err := mutex.New(c, t.Name()).Lock(context.Background())
	require.NoError(t, err)
	assert.True(t, isLocked(t, m))
	assert.Equal(t, 0, holdCount(t, m, l.Context()))
	require.NoError(t, l.Unlock())
}

func TestAPIFailures(t *testing.T) {
	srv := redistest.Shared(t)
	ctx := context.Background()

	invalid := rwlock.New(locktest.Client(t, srv.Client(t)), "")
	_, err := invalid.IsLocked(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	_, err = invalid.ForceUnlock(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	_, err = invalid.HoldCount(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)

	c, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	closed := rwlock.New(c, t.Name())
	require.NoError(t, c.Close())
	_, err = closed.IsLocked(ctx)
	assert.ErrorIs(t, err, relock.ErrClosed)
	_, err = closed.ForceUnlock(ctx)
	assert.ErrorIs(t, err, relock.ErrClosed)
	_, err = closed.HoldCount(ctx)
	assert.ErrorIs(t, err, relock.ErrClosed)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	_, err = m.IsLocked(canceled)
	assert.ErrorIs(t, err, context.Canceled, "a Redis call under an ended ctx fails with its error")
}
