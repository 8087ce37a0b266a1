package integration

import (
	"context"
	"fmt"
	"sync"
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
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

var ghostKinds = []struct {
	kind string
	lock func(*relock.Client, string) relock.Locker
}{
	{"mutex", func(c *relock.Client, n string) relock.Locker { return mutex.New(c, n) }},
	{"reentrant", func(c *relock.Client, n string) relock.Locker { return reentrant.New(c, n) }},
	{"fair", func(c *relock.Client, n string) relock.Locker { return fair.New(c, n) }},
	{"rwlock", func(c *relock.Client, n string) relock.Locker { return rwlock.New(c, n).Locker() }},
}

// assertNoTrace waits until lock name has no holder and no waiter left in
// Redis: no lock key, no queue entry, no waiting writer. A ghost — a grant
// or a place taken by an attempt whose caller had given up — would keep the
// lock for a whole lease (30s here), far past the wait.
func assertNoTrace(t *testing.T, check func() (map[string]int64, error)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := check()
		require.NoError(t, err)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a ghost is left in Redis: %v", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Lock whose ctx ends while Redis stalls with its attempt queued leaves
// nothing behind, whichever lands first of the attempt and its cleanup.
func TestTimedOutLockLeavesNoGhost(t *testing.T) {
	srv := redistest.New(t)
	rc := srv.Client(t)
	admin := srv.Client(t)
	for _, tc := range ghostKinds {
		t.Run(tc.kind, func(t *testing.T) {
			holder := locktest.Client(t, srv.Client(t))
			c := locktest.Client(t, rc)
			for trial := range 20 {
				name := fmt.Sprintf("%s/%d", t.Name(), trial)
				keys := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
				held, err := tc.lock(holder, name).Lock(context.Background())
				require.NoError(t, err)
				// Stall Redis (every client's commands wait 300ms) and let the
				// Lock's deadline pass while its attempt waits behind the stall.
				stalled := make(chan error, 1)
				go func() {
					stalled <- admin.Do(context.Background(), admin.B().ClientPause().Timeout(300).All().Build()).Error()
				}()
				time.Sleep(20 * time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				_, err = tc.lock(c, name).Lock(ctx)
				cancel()
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				require.NoError(t, <-stalled)
				require.NoError(t, held.Unlock())
				assertNoTrace(t, func() (map[string]int64, error) { return traces(rc, keys) })
			}
		})
	}
}

// Waiters canceled while the lock is held leave no ghost once it is
// released.
func TestCanceledWaitersLeaveNoGhost(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	for _, tc := range ghostKinds {
		t.Run(tc.kind, func(t *testing.T) {
			holder := locktest.Client(t, srv.Client(t))
			c := locktest.Client(t, rc)
			for round := range 10 {
				name := fmt.Sprintf("%s/%d", t.Name(), round)
				keys := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
				held, err := tc.lock(holder, name).Lock(context.Background())
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				for range 100 {
					wg.Go(func() {
						if _, err := tc.lock(c, name).Lock(ctx); err == nil {
							t.Error("a waiter acquired a held lock")
						}
					})
				}
				time.Sleep(20 * time.Millisecond) // some are waiting, some attempting
				cancel()
				wg.Wait()
				require.NoError(t, held.Unlock())
				assertNoTrace(t, func() (map[string]int64, error) { return traces(rc, keys) })
			}
		})
	}
}

// traces returns what Redis holds for the lock's holders and waiters, by
// key, leaving out what is empty.
func traces(rc rueidis.Client, keys luascripts.Keys) (map[string]int64, error) {
	ctx := context.Background()
	cmds := rueidis.Commands{
		rc.B().Exists().Key(keys.Lock).Build(),
		rc.B().Exists().Key(keys.Queue).Build(),
		rc.B().Zcard().Key(keys.Readers).Build(),
	}
	names := []string{"lock", "queue", "readers"}
	left := map[string]int64{}
	for i, r := range rc.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, err
		}
		if n > 0 {
			left[names[i]] = n
		}
	}
	return left, nil
}
