package relock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/redlock"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
	"github.com/relockgo/relock/semaphore"
)

// forcible is a lock as TestLossIsToldAtOnce takes and forces it.
type forcible struct {
	lock  func(ctx context.Context) (*relock.Lease, error)
	force func(ctx context.Context) (bool, error)
}

// A hold with the default 30 s lease that another Client force-unlocks
// ends at once, told by the loss notice, not at its next renewal (10 s
// later): its Context is done with cause ErrLockLost within 100 ms at the
// 99th percentile of 100 runs, for every kind and for a Redlock. A hold of
// another lock of the same Client, not named by the notices, lives on.
func TestLossIsToldAtOnce(t *testing.T) {
	srv := redistest.Shared(t)
	holder := locktest.Client(t, srv.Client(t))
	admin := locktest.Client(t, srv.Client(t))
	srvs := redistest.NewN(t, 3)
	var holders, admins []*relock.Client
	for _, s := range srvs {
		holders = append(holders, locktest.Client(t, s.Client(t)))
		admins = append(admins, locktest.Client(t, s.Client(t)))
	}
	ctx := context.Background()

	kinds := []struct {
		name string
		make func(c *relock.Client, name string) forcible
	}{
		{"mutex", func(c *relock.Client, name string) forcible {
			m := mutex.New(c, name)
			return forcible{m.Lock, m.ForceUnlock}
		}},
		{"reentrant", func(c *relock.Client, name string) forcible {
			m := reentrant.New(c, name)
			return forcible{m.Lock, m.ForceUnlock}
		}},
		{"fair", func(c *relock.Client, name string) forcible {
			m := fair.New(c, name)
			return forcible{m.Lock, m.ForceUnlock}
		}},
		{"rwlock-write", func(c *relock.Client, name string) forcible {
			m := rwlock.New(c, name)
			return forcible{m.Lock, m.ForceUnlock}
		}},
		{"rwlock-read", func(c *relock.Client, name string) forcible {
			m := rwlock.New(c, name)
			return forcible{m.RLock, m.ForceUnlock}
		}},
		{"semaphore", func(c *relock.Client, name string) forcible {
			s := semaphore.New(c, name, 3)
			return forcible{func(ctx context.Context) (*relock.Lease, error) { return s.Acquire(ctx, 2) }, s.ForceUnlock}
		}},
	}
	run := func(t *testing.T, held, forced func(name string) forcible, listening func() bool) {
		bystander, err := held(t.Name() + "/bystander").lock(ctx)
		require.NoError(t, err)
		defer bystander.Unlock()
		locktest.Eventually(t, "the holder to listen for loss notices", listening)
		const runs = 100
		took := make([]time.Duration, 0, runs)
		for range runs {
			l, err := held(t.Name()).lock(ctx)
			require.NoError(t, err)
			start := time.Now()
			ok, err := forced(t.Name()).force(ctx)
			require.NoError(t, err)
			require.True(t, ok, "the lock was not held")
			select {
			case <-l.Context().Done():
				took = append(took, time.Since(start))
			case <-time.After(5 * time.Second): // the renewal comes at 10 s
				t.Fatal("the hold did not end within 5s of its force unlock")
			}
			require.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
			assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost, "Unlock of a hold told lost")
		}
		require.NoError(t, bystander.Context().Err(), "a hold no notice named ended")
		slices.Sort(took)
		p50, p99 := took[runs/2-1], took[runs*99/100-1]
		t.Logf("loss told after force unlock: p50 %v, p99 %v, max %v", p50, p99, took[runs-1])
		assert.LessOrEqual(t, p99, 100*time.Millisecond, "p99 of the time from ForceUnlock to the holder's Context's end")
	}
	for _, kd := range kinds {
		t.Run(kd.name, func(t *testing.T) {
			run(t,
				func(name string) forcible { return kd.make(holder, name) },
				func(name string) forcible { return kd.make(admin, name) },
				holder.Listening)
		})
	}
	t.Run("redlock", func(t *testing.T) {
		run(t,
			func(name string) forcible {
				m := redlock.New(holders, name)
				return forcible{m.Lock, m.ForceUnlock}
			},
			func(name string) forcible {
				m := redlock.New(admins, name)
				return forcible{m.Lock, m.ForceUnlock}
			},
			holders[0].Listening)
	})
}
