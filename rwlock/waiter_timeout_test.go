package rwlock_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/rwlock"
)

// A waiting writer with a short waiter timeout never makes the waiting
// writers' key expire under one with a long timeout: after the short
// writer heart-beat and left, and its timeout passed, a new reader is still
// held back by the writer that waits.
func TestShortWaiterTimeoutKeepsWriterPreference(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c, other := locktest.Client(t, srv.Client(t)), locktest.Client(t, srv.Client(t))
	name := t.Name()
	k := luascripts.NewKeys("relock", name)
	const long, short = 20 * time.Second, 200 * time.Millisecond
	writers := func() int64 {
		return int64(locktest.QueueLen(context.Background(), rc, k.Queue))
	}
	// earliest returns the waiting writer whose deadline comes first.
	earliest := func() (string, int64) {
		ws, err := locktest.Queue(context.Background(), rc, k.Queue)
		require.NoError(t, err)
		require.NotEmpty(t, ws)
		first := slices.MinFunc(ws, func(a, b luascripts.QueuedWaiter) int { return cmp.Compare(a.DeadlineMs, b.DeadlineMs) })
		return first.Owner, first.DeadlineMs
	}

	reader, err := rwlock.New(c, name).RLock(context.Background())
	require.NoError(t, err)

	// The writer that keeps waiting reports its grant, then its Unlock; the
	// test reads both, so it does not outlive the test.
	granted, unlocked := make(chan error, 1), make(chan error, 1)
	go func() {
		w, err := rwlock.New(c, name, relock.WithWaiterTimeout(long)).Lock(t.Context())
		granted <- err
		if err == nil {
			unlocked <- w.Unlock()
		}
	}()
	locktest.Eventually(t, "the long writer to wait", func() bool { return writers() == 1 })

	// A writer with a short timeout waits, heart-beats, and gives up.
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		_, err := rwlock.New(other, name, relock.WithWaiterTimeout(short)).Lock(sctx)
		left <- err
	}()
	locktest.Eventually(t, "the short writer to wait", func() bool { return writers() == 2 })
	who, deadline := earliest()
	locktest.Eventually(t, "the short writer's heartbeat", func() bool {
		m, d := earliest()
		return m != who || d > deadline
	})
	cancel()
	require.Error(t, <-left)
	// Its withdrawal may finish after Lock returned (cleanup runs in the
	// background).
	locktest.Eventually(t, "the short writer to leave", func() bool { return writers() == 1 })

	// Well past the short timeout, on the server's clock.
	past := serverMillis(t, rc) + 2*short.Milliseconds()
	locktest.Eventually(t, "the short timeout to pass on the server", func() bool { return serverMillis(t, rc) > past })
	assert.Equal(t, int64(1), writers(), "the long writer still waits")
	admitted, err := rwlock.New(other, name).TryRLock(context.Background())
	if err == nil {
		admitted.Unlock() // the bug: let the writer in, so the test ends
	}
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "a new reader is held back by the waiting writer")

	require.NoError(t, reader.Unlock())
	select {
	case err := <-granted:
		require.NoError(t, err, "the waiting writer acquires")
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting writer did not acquire")
	}
	require.NoError(t, <-unlocked)
}
