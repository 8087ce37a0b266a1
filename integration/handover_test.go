package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

// A hand-over that reaches its waiter late is not taken on trust: here the
// waiter is paused (SIGSTOP) while queued, the release hands it the lock
// (its "owner token" wake-up waits in the paused process's socket), Redis
// restarts without persistence and forgets the grant, and another Client
// takes the lock. When the waiter resumes, the wake-up it reads is seconds
// old: its Lock must not return a lease for a grant Redis no longer has
// while the other owner holds the lock. It gets the lock after that owner
// lets go.
func TestStaleHandOverIsNotTrusted(t *testing.T) {
	for _, kind := range []string{"mutex", "reentrant", "fair", "rwlock"} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.New(t)
			rc := srv.Client(t)
			ctx := context.Background()
			name := t.Name()
			keys := luascripts.NewKeys(relock.DefaultKeyPrefix, name)
			holder := kinds[kind](locktest.Client(t, srv.Client(t)), name)
			first, err := holder.Lock(ctx)
			require.NoError(t, err)

			waiter := startChild(t, srv.Addr(), "wait", kind, name, "5s")
			locktest.Eventually(t, "the child queued", func() bool {
				return locktest.QueueLen(ctx, rc, keys.Queue) == 1
			})
			time.Sleep(200 * time.Millisecond) // its subscription confirmed
			require.NoError(t, waiter.cmd.Process.Signal(syscall.SIGSTOP))
			resumed := false
			defer func() {
				if !resumed {
					waiter.cmd.Process.Signal(syscall.SIGCONT)
				}
			}()

			require.NoError(t, first.Unlock()) // hands the lock to the paused child
			holderKey, err := rc.Do(ctx, rc.B().Type().Key(keys.Lock).Build()).ToString()
			require.NoError(t, err)
			require.NotEqual(t, "none", holderKey, "the release handed the lock on")
			srv.Restart(t) // forgets the grant
			other := kinds[kind](locktest.Client(t, srv.Client(t)), name)
			second, err := other.Lock(ctx)
			require.NoError(t, err)
			time.Sleep(1500 * time.Millisecond) // the wake-up ages in the paused child
			require.NoError(t, waiter.cmd.Process.Signal(syscall.SIGCONT))
			resumed = true

			select {
			case line := <-waiter.lines:
				t.Fatalf("the child said %q while another owner held the lock: it trusted a stale hand-over", line)
			case <-time.After(2 * time.Second):
			}
			require.NoError(t, second.Unlock())
			waiter.expect(t, "acquired")
		})
	}
}
