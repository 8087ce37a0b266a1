package relock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// adminLocker is a lock that can be forced open.
type adminLocker interface {
	relock.Locker
	ForceUnlock(context.Context) (bool, error)
}

// ForceUnlock of a lock that a release has just handed to a queued waiter
// frees it without locking that waiter out: the waiter's Lock is still
// running, and its next attempt (it takes a grant up by one when it has a
// fixed lease, waits for replicas, or missed the wake-up) is granted, not
// refused as an owner that gave up.
func TestForceUnlockDoesNotLockOutAHandedWaiter(t *testing.T) {
	for _, kd := range []struct {
		name    string
		acquire luascripts.Script
		lock    func(c *relock.Client, name string) adminLocker
	}{
		{"mutex", luascripts.MutexAcquire, func(c *relock.Client, n string) adminLocker {
			return mutex.New(c, n)
		}},
		{"fair", luascripts.FairAcquire, func(c *relock.Client, n string) adminLocker {
			return fair.New(c, n)
		}},
	} {
		t.Run(kd.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			rc := srv.Client(t)
			ctx := context.Background()
			m := kd.lock(locktest.Client(t, srv.Client(t)), t.Name())
			keys := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())
			held, err := m.Lock(ctx)
			require.NoError(t, err)
			attempt := rawWaiter(t, rc, kd.acquire, keys, "waiter:1", "5000")

			require.NoError(t, held.Unlock()) // hands the lock to waiter:1
			forced, err := m.ForceUnlock(ctx)
			require.NoError(t, err)
			require.True(t, forced, "the lock was held, by the waiter it was handed to")

			reply, err := attempt.Exec(ctx, rc).AsIntSlice()
			require.NoError(t, err)
			granted, _, ok := luascripts.AcquireReply(reply)
			require.True(t, ok && granted, "the waiter's next attempt after ForceUnlock: %v (refused as gone?)", reply)
		})
	}
}
