package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
)

// assertRueidisClosed checks the one shape every call reports a closed
// rueidis client with.
func assertRueidisClosed(t *testing.T, call string, err error) {
	t.Helper()
	assert.ErrorIs(t, err, relock.ErrClosed, call)
	assert.ErrorIs(t, err, rueidis.ErrClosing, call)
	if err != nil {
		assert.Contains(t, err.Error(), "the rueidis client is closed", call)
		assert.NotContains(t, err.Error(), "use after Close", call)
	}
}

func TestClosedRueidisClientIsReportedByEveryCall(t *testing.T) {
	ctx := context.Background()
	rc := redistest.Shared(t).Client(t)
	c, err := relock.New(rc)
	require.NoError(t, err)
	defer c.Close()
	m := mutex.New(c, t.Name()+"/mutex")
	r := reentrant.New(c, t.Name()+"/reentrant")
	fixed := reentrant.New(c, t.Name()+"/fixed", relock.WithLease(time.Minute))
	held, err := r.Lock(ctx)
	require.NoError(t, err)
	extendable, err := fixed.Lock(ctx)
	require.NoError(t, err)

	rc.Close()

	_, err = m.Lock(ctx)
	assertRueidisClosed(t, "Lock", err)
	_, err = m.TryLock(ctx)
	assertRueidisClosed(t, "TryLock", err)
	_, err = r.Lock(held.Context())
	assertRueidisClosed(t, "Lock (re-entry)", err)
	_, err = m.IsLocked(ctx)
	assertRueidisClosed(t, "IsLocked", err)
	_, err = m.ForceUnlock(ctx)
	assertRueidisClosed(t, "ForceUnlock", err)
	_, err = r.HoldCount(held.Context())
	assertRueidisClosed(t, "HoldCount", err)
	assertRueidisClosed(t, "Extend", extendable.Extend(ctx, time.Minute))
	assertRueidisClosed(t, "Unlock", held.Unlock())
	assertRueidisClosed(t, "Unlock", extendable.Unlock())
}

func TestClosedRelockClientIsNotReportedAsRueidis(t *testing.T) {
	ctx := context.Background()
	c, err := relock.New(redistest.Shared(t).Client(t))
	require.NoError(t, err)
	m := mutex.New(c, t.Name())
	require.NoError(t, c.Close())
	for call, f := range map[string]func() error{
		"Lock":        func() error { _, err := m.Lock(ctx); return err },
		"TryLock":     func() error { _, err := m.TryLock(ctx); return err },
		"IsLocked":    func() error { _, err := m.IsLocked(ctx); return err },
		"ForceUnlock": func() error { _, err := m.ForceUnlock(ctx); return err },
	} {
		err := f()
		assert.ErrorIs(t, err, relock.ErrClosed, call)
		assert.NotErrorIs(t, err, rueidis.ErrClosing, call)
		if err != nil {
			assert.Contains(t, err.Error(), "use after Close", call)
		}
	}
}

// A Lock waiting with no deadline learns that its rueidis client closed from
// the wake-up hub, not from its fallback timer.
func TestWaitingLockNoticesClosedRueidisClient(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Shared(t)
	holder, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	defer holder.Close()
	held, err := mutex.New(holder, t.Name()).Lock(ctx)
	require.NoError(t, err)
	defer held.Unlock()

	rc := srv.Client(t)
	c, err := relock.New(rc)
	require.NoError(t, err)
	defer c.Close()
	waiting := make(chan error, 1)
	go func() {
		_, err := mutex.New(c, t.Name()).Lock(ctx)
		waiting <- err
	}()
	// The waiter has subscribed to the lock's wake-ups, and queued (a
	// mutex's waiter does once it starves): it sleeps until a wake-up.
	probe := srv.Client(t)
	base := "relock:{" + t.Name() + "}"
	require.Eventually(t, func() bool {
		subs, err := probe.Do(ctx, probe.B().PubsubNumsub().Channel(base+":wake").Build()).AsIntMap()
		if err != nil || subs[base+":wake"] == 0 {
			return false
		}
		return locktest.QueueLen(ctx, probe, base+":queue") > 0
	}, 10*time.Second, 5*time.Millisecond)

	closed := time.Now()
	rc.Close()
	select {
	case err := <-waiting:
		// The fallback timer would take its 5s (maxWait); the wake-up hub
		// checks its rueidis client every second while waiters wait.
		assert.Less(t, time.Since(closed), 3*time.Second)
		assertRueidisClosed(t, "Lock", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting Lock did not return after its rueidis client closed")
	}
}
