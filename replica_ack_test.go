package relock_test

import (
	"context"
	"errors"
	"testing"
	"time"

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

// On a master with no replica, WithReplicaAck(1, …) acknowledges no grant:
// every kind's TryLock fails with ErrNotReplicated and leaves the lock
// free, Lock keeps trying until its ctx ends, and a Client without the
// option then takes the lock without waiting out a lease.
func TestReplicaAckWithoutReplicas(t *testing.T) {
	srv := redistest.Shared(t)
	acked := locktest.Client(t, srv.Client(t), relock.WithReplicaAck(1, 20*time.Millisecond))
	plain := locktest.Client(t, srv.Client(t))
	ctx := context.Background()
	name := t.Name()
	kinds := map[string]func(c *relock.Client) relock.Locker{
		"mutex":     func(c *relock.Client) relock.Locker { return mutex.New(c, name+"/mutex") },
		"reentrant": func(c *relock.Client) relock.Locker { return reentrant.New(c, name+"/reentrant") },
		"fair":      func(c *relock.Client) relock.Locker { return fair.New(c, name+"/fair") },
		"read":      func(c *relock.Client) relock.Locker { return rwlock.New(c, name+"/rw").RLocker() },
		"write":     func(c *relock.Client) relock.Locker { return rwlock.New(c, name+"/rw") },
	}
	for kind, newLock := range kinds {
		t.Run(kind, func(t *testing.T) {
			l := newLock(acked)
			lease, err := l.TryLock(ctx)
			require.ErrorIs(t, err, relock.ErrNotReplicated)
			assert.Nil(t, lease)
			assert.NotErrorIs(t, err, relock.ErrNotAcquired)

			lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			lease, err = l.Lock(lctx)
			require.ErrorIs(t, err, relock.ErrNotReplicated)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Nil(t, lease)

			// Nothing was left held or queued: a Client without the option
			// takes the lock long before a lease (30s) could expire. Lock,
			// not TryLock: the attempt in flight at the ctx's end finishes
			// in the background, and its grant is released after its WAIT.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			lease, err = newLock(plain).Lock(pctx)
			require.NoError(t, err)
			require.NoError(t, lease.Unlock())
		})
	}
}

// A grant that is not acknowledged ends no hold of another owner: a
// TryLock with WithReplicaAck that finds the lock held fails with
// ErrNotAcquired, as without the option, and the holder keeps it.
func TestReplicaAckRefusalIsNotAcquired(t *testing.T) {
	srv := redistest.Shared(t)
	acked := locktest.Client(t, srv.Client(t), relock.WithReplicaAck(1, 20*time.Millisecond))
	plain := locktest.Client(t, srv.Client(t))
	ctx := context.Background()
	held, err := mutex.New(plain, t.Name()).Lock(ctx)
	require.NoError(t, err)
	_, err = mutex.New(acked, t.Name()).TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.False(t, errors.Is(err, relock.ErrNotReplicated), "%v", err)
	require.NoError(t, held.Context().Err())
	require.NoError(t, held.Unlock())
}

func TestReplicaAckRejectsBadArguments(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	for _, o := range []relock.Option{
		relock.WithReplicaAck(-1, time.Second),
		relock.WithReplicaAck(1, 0),
		relock.WithReplicaAck(1, time.Microsecond),
	} {
		_, err := relock.New(rc, o)
		require.ErrorIs(t, err, relock.ErrInvalid)
	}
	c, err := relock.New(rc, relock.WithReplicaAck(0, 0)) // off
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
