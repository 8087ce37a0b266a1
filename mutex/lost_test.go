package mutex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
)

// lostToAnotherKind returns a mutex lease (default watchdog lease) whose
// lock was force-unlocked and then taken by a reentrant lock of the same
// name on another Client: the lock key is a hash now, not a string.
func lostToAnotherKind(t *testing.T) *relock.Lease {
	t.Helper()
	srv := redistest.Shared(t)
	name := t.Name()
	m := mutex.New(locktest.Client(t, srv.Client(t)), name)
	ctx := context.Background()

	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)
	other := reentrant.New(locktest.Client(t, srv.Client(t)), name)
	taken, err := other.TryLock(ctx)
	require.NoError(t, err, "a lock of another kind takes the free name")
	t.Cleanup(func() {
		held, err := other.IsLocked(context.Background())
		assert.NoError(t, err)
		assert.True(t, held, "the other kind's lock is untouched")
		assert.NoError(t, taken.Unlock())
	})
	return lease
}

// A mutex whose lease was lost while a lock of another kind took the name
// reports the loss on Unlock, as with any other new holder: ErrLockLost,
// never Redis's WRONGTYPE.
func TestUnlockAfterAnotherKindTookTheName(t *testing.T) {
	lease := lostToAnotherKind(t)
	err := lease.Unlock()
	assert.ErrorIs(t, err, relock.ErrLockLost)
	if err != nil {
		assert.NotContains(t, err.Error(), "WRONGTYPE")
	}
}

// The lease's Context then ends with the loss, not as after a release.
func TestContextCauseAfterAnotherKindTookTheName(t *testing.T) {
	lease := lostToAnotherKind(t)
	lease.Unlock()
	cause := context.Cause(lease.Context())
	assert.True(t, errors.Is(cause, relock.ErrLockLost), "the lease's Context ends with ErrLockLost, not %v", cause)
}
