package relock_test

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
)

// A grant whose reply arrives after its lease (Redis paused with the
// acquire in its socket) is not handed out: TryLock fails with
// ErrNotAcquired and releases it; Lock tries again and returns a lease that
// is certainly held.
func TestGrantArrivingAfterItsLeaseIsNotHandedOut(t *testing.T) {
	srv := redistest.New(t)
	const lease = time.Second
	c := locktest.Client(t, srv.Client(t))
	m := mutex.New(c, t.Name(), relock.WithLease(lease))
	ctx := context.Background()
	l, err := m.Lock(ctx) // loads the script, so the paused attempt is one command
	require.NoError(t, err)
	require.NoError(t, l.Unlock())

	for _, try := range []bool{true, false} {
		type result struct {
			l   *relock.Lease
			err error
			at  time.Time
		}
		got := make(chan result, 1)
		srv.Pause(t)
		go func() {
			var r result
			if try {
				r.l, r.err = m.TryLock(ctx)
			} else {
				r.l, r.err = m.Lock(ctx)
			}
			r.at = time.Now()
			got <- r
		}()
		time.Sleep(lease + lease/2) // the fault: Redis stays paused past the lease
		srv.Resume(t)
		r := <-got
		if try {
			assert.ErrorIs(t, r.err, relock.ErrNotAcquired, "TryLock")
			assert.Nil(t, r.l)
			locktest.Eventually(t, "the late grant released", func() bool {
				locked, err := m.IsLocked(ctx)
				return err == nil && !locked
			})
			continue
		}
		require.NoError(t, r.err, "Lock tries again")
		assert.True(t, r.at.Before(r.l.ValidUntil()), "Lock returned a lease already past its ValidUntil")
		assert.NoError(t, r.l.Context().Err())
		require.NoError(t, r.l.Unlock())
	}
}
