package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

// relock works on a rueidis client built with rueidis.SentinelOption, as
// the README shows: locks, waiters woken through pub/sub, renewals.
func TestSentinelClient(t *testing.T) {
	g := redistest.NewReplicationGroup(t, 1) // a master, a replica and three sentinels
	master := g.Master(t)
	rc := g.Client(t)
	c := locktest.Client(t, rc, relock.WithWatchdogTimeout(300*time.Millisecond))
	other := locktest.Client(t, master.Client(t))
	ctx := context.Background()

	l, err := mutex.New(c, t.Name()).Lock(ctx)
	require.NoError(t, err)
	_, err = mutex.New(other, t.Name()).TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the lock is on the master the sentinel names")
	time.Sleep(time.Second) // several renewal periods
	require.NoError(t, l.Context().Err(), "renewed through the sentinel client")
	require.NoError(t, l.Unlock())

	held, err := fair.New(other, t.Name()+"/fair").Lock(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := fair.New(c, t.Name()+"/fair").Lock(ctx)
		if err == nil {
			err = l.Unlock()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it queue
	require.NoError(t, held.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(4 * time.Second): // under the waiter's 5s fallback
		t.Fatal("the waiter on the sentinel client was not woken by the release")
	}
}
