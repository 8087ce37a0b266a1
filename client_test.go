package relock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestNewRejectsBadArguments(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	_, err := relock.New(nil)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	for _, opt := range []relock.Option{
		relock.WithKeyPrefix(""),
		relock.WithKeyPrefix("a{b"),
		relock.WithKeyPrefix("a}b"),
		relock.WithWatchdogTimeout(0),
		relock.WithWatchdogTimeout(-time.Second),
		relock.WithWatchdogTimeout(relock.MinLease - 1),
	} {
		c, err := relock.New(rc, opt)
		assert.Nil(t, c)
		assert.ErrorIs(t, err, relock.ErrInvalid)
	}
	c, err := relock.New(rc, relock.WithLogger(nil), relock.WithWatchdogTimeout(relock.MinLease))
	require.NoError(t, err, "a nil logger discards; MinLease is allowed")
	require.NoError(t, c.Close())
}

func TestKeyPrefix(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c, err := relock.New(rc, relock.WithKeyPrefix("app"))
	require.NoError(t, err)
	defer c.Close()
	lease, err := mutex.New(c, t.Name()).Lock(context.Background())
	require.NoError(t, err)
	for key, want := range map[string]int64{"app:{" + t.Name() + "}": 1, "relock:{" + t.Name() + "}": 0, "app:{" + t.Name() + "}:fence": 1} {
		n, err := rc.Do(context.Background(), rc.B().Exists().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, want, n, key)
	}
	require.NoError(t, lease.Unlock())
}

func TestCloseReleasesLeasesAndEndsWaiters(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c, err := relock.New(rc)
	require.NoError(t, err)
	ctx := context.Background()
	a, err := mutex.New(c, t.Name()+"/a").Lock(ctx)
	require.NoError(t, err)
	b, err := mutex.New(c, t.Name()+"/b").Lock(ctx)
	require.NoError(t, err)

	// A waiter of this Client, blocked on a lock another Client holds.
	other, err := relock.New(srv.Client(t))
	require.NoError(t, err)
	defer other.Close()
	held, err := mutex.New(other, t.Name()+"/held").Lock(ctx)
	require.NoError(t, err)
	defer held.Unlock()
	waiting := make(chan error, 1)
	go func() {
		_, err := mutex.New(c, t.Name()+"/held").Lock(ctx)
		waiting <- err
	}()

	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-waiting, relock.ErrClosed, "Close ends waits")
	for _, l := range []*relock.Lease{a, b} {
		<-l.Context().Done()
		assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrClosed)
		assert.ErrorIs(t, l.Unlock(), relock.ErrClosed)
		n, err := rc.Do(ctx, rc.B().Exists().Key("relock:{"+l.Name()+"}").Build()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "Close released %s", l.Name())
	}
	require.NoError(t, c.Close(), "Close is idempotent")
	_, err = mutex.New(c, t.Name()).Lock(ctx)
	assert.ErrorIs(t, err, relock.ErrClosed)
}

func TestLeaseContext(t *testing.T) {
	c, err := relock.New(redistest.Shared(t).Client(t))
	require.NoError(t, err)
	defer c.Close()
	type key struct{}
	lockCtx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "request-7"))
	lease, err := mutex.New(c, t.Name()).Lock(lockCtx)
	require.NoError(t, err)
	cancel()
	assert.NoError(t, lease.Context().Err(), "canceling the Lock ctx after acquisition does not end the lease")
	assert.Equal(t, "request-7", lease.Context().Value(key{}), "the lease's Context keeps the Lock ctx's values")
	locked, err := mutex.New(c, t.Name()).IsLocked(context.Background())
	require.NoError(t, err)
	assert.True(t, locked)
	require.NoError(t, lease.Unlock())
	assert.ErrorIs(t, lease.Context().Err(), context.Canceled)
}

func TestLockWithDoneContext(t *testing.T) {
	c, err := relock.New(redistest.Shared(t).Client(t))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := mutex.New(c, t.Name())
	_, err = m.Lock(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	locked, err := m.IsLocked(context.Background())
	require.NoError(t, err)
	assert.False(t, locked, "a done ctx takes nothing")
}

func TestLeaseLostWhileRedisPaused(t *testing.T) {
	srv := redistest.New(t)
	const lease = 500 * time.Millisecond
	c, err := relock.New(srv.Client(t), relock.WithWatchdogTimeout(lease))
	require.NoError(t, err)
	defer c.Close()
	l, err := mutex.New(c, t.Name()).Lock(context.Background())
	require.NoError(t, err)

	srv.Pause(t)
	select {
	case <-l.Context().Done():
	case <-time.After(30 * time.Second):
		srv.Resume(t)
		t.Fatal("the lease outlived its validity while Redis was unreachable")
	}
	srv.Resume(t)
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
	assert.False(t, time.Now().Before(l.ValidUntil()), "lost only once ValidUntil passed")
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
}
