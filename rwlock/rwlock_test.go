package rwlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/rwlock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestReadersShareWritersExclude(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	other := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()

	r1, err := m.RLock(ctx)
	require.NoError(t, err)
	r2, err := other.TryRLock(ctx)
	require.NoError(t, err, "readers share")
	_, err = other.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "a writer waits for readers")
	require.NoError(t, r1.Unlock())
	_, err = other.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "for every reader")
	require.NoError(t, r2.Unlock())

	w, err := other.TryLock(ctx)
	require.NoError(t, err, "free once the readers left")
	_, err = m.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "readers wait for the writer")
	_, err = m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "writers exclude writers")
	require.NoError(t, w.Unlock())
	assert.Greater(t, w.Token(), r2.Token())
}

func TestWaitingWriterHoldsBackNewReadersNotReentrantOnes(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	reader, err := m.RLock(ctx)
	require.NoError(t, err)

	writer := make(chan *relock.Lease, 1)
	go func() {
		w, err := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name()).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		writer <- w
	}()
	rc := srv.Client(t)
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{"+t.Name()+"}:queue") == 1
	})
	_, err = m.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "a new reader is held back by the waiting writer")
	again, err := m.RLock(reader.Context())
	require.NoError(t, err, "a reader re-entering its own chain is admitted")
	require.NoError(t, again.Unlock())
	require.NoError(t, reader.Unlock())
	w := <-writer
	require.NotNil(t, w)
	require.NoError(t, w.Unlock())
}

func TestDowngradeAndUpgrade(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	other := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()

	w, err := m.Lock(ctx)
	require.NoError(t, err)
	r, err := m.RLock(w.Context())
	require.NoError(t, err, "a writer may take the read lock in its chain")
	_, err = other.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "others wait while the write lock is held")

	// Another reader waits for the downgrade.
	joined := make(chan error, 1)
	go func() {
		l, err := other.RLock(ctx)
		if err == nil {
			err = l.Unlock()
		}
		joined <- err
	}()
	require.NoError(t, w.Unlock(), "releasing the write side leaves the chain a reader")
	require.NoError(t, <-joined, "and wakes the waiting readers")
	assert.NoError(t, r.Context().Err(), "the downgraded reader still holds")
	_, err = other.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the downgraded reader excludes writers")

	_, err = m.Lock(r.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock, "upgrade would wait for itself")
	_, err = m.TryLock(r.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock)
	require.NoError(t, r.Unlock())

	w2, err := other.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, w2.Unlock())
}

func TestWriterReentry(t *testing.T) {
	m := rwlock.New(locktest.Client(t, redistest.Shared(t).Client(t)), t.Name())
	w, err := m.Lock(context.Background())
	require.NoError(t, err)
	inner, err := m.Lock(w.Context())
	require.NoError(t, err)
	assert.Equal(t, w.Token(), inner.Token())
	require.NoError(t, w.Unlock(), "the outer lease may go first")
	_, err = m.TryRLock(context.Background())
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the inner lease keeps the write lock")
	require.NoError(t, inner.Unlock())
	l, err := m.TryRLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock())
}

func TestInvariantsAndReaderOverlap(t *testing.T) {
	srv := redistest.Shared(t)
	clients := []*relock.Client{locktest.Client(t, srv.Client(t)), locktest.Client(t, srv.Client(t))}
	name := t.Name()
	var (
		readers, writers atomic.Int32
		maxReaders       atomic.Int32
		wg               sync.WaitGroup
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rwlock.New(clients[i%2], name)
			for j := range 15 {
				write := (i+j)%5 == 0
				lock := m.RLock
				if write {
					lock = m.Lock
				}
				l, err := lock(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if write {
					if writers.Add(1) != 1 || readers.Load() != 0 {
						t.Error("a writer with someone else inside")
					}
					time.Sleep(time.Millisecond)
					writers.Add(-1)
				} else {
					n := readers.Add(1)
					if writers.Load() != 0 {
						t.Error("a reader with a writer inside")
					}
					for {
						m := maxReaders.Load()
						if n <= m || maxReaders.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(3 * time.Millisecond)
					readers.Add(-1)
				}
				if err := l.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	assert.Greater(t, maxReaders.Load(), int32(1), "readers overlap")
}

func TestLostReadLease(t *testing.T) {
	srv := redistest.Shared(t)
	c := locktest.Client(t, srv.Client(t), relock.WithWatchdogTimeout(300*time.Millisecond))
	m := rwlock.New(c, t.Name())
	r, err := m.RLock(context.Background())
	require.NoError(t, err)
	rc := srv.Client(t)
	require.NoError(t, rc.Do(context.Background(), rc.B().Del().Key("relock:{"+t.Name()+"}").Build()).Error())
	select {
	case <-r.Context().Done():
		assert.ErrorIs(t, context.Cause(r.Context()), relock.ErrLockLost)
	case <-time.After(20 * time.Second):
		t.Fatal("the lost read lease did not end")
	}
	assert.ErrorIs(t, r.Unlock(), relock.ErrLockLost)
}

func TestLockers(t *testing.T) {
	m := rwlock.New(locktest.Client(t, redistest.Shared(t).Client(t)), t.Name())
	r, err := m.RLocker().Lock(context.Background())
	require.NoError(t, err)
	r2, err := m.RLocker().TryLock(context.Background())
	require.NoError(t, err, "RLocker takes read locks, which share")
	_, err = m.Locker().TryLock(context.Background())
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "Locker takes the write lock")
	require.NoError(t, r.Unlock())
	require.NoError(t, r2.Unlock())
}

// A waiting writer that loses every race to later writers is not starved:
// waiting writers take the lock in arrival order.
func TestWriterNoStarvation(t *testing.T) {
	srv := redistest.Shared(t)
	locktest.NoStarvation(t, srv.Addr(), srv.Client(t), func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return rwlock.New(c, name, opts...).Locker()
	})
}

// A writer that a release handed the lock to holds it as fully as one that
// took it: it excludes readers and writers, downgrades in its own call
// chain, and its release leaves its chain's reader with the lock
// read-locked, which other readers join.
func TestHandedWriterDowngrades(t *testing.T) {
	srv := redistest.Shared(t)
	m := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	other := rwlock.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	first, err := m.Lock(ctx)
	require.NoError(t, err)

	writer := make(chan *relock.Lease, 1)
	go func() {
		w, err := other.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		writer <- w
	}()
	rc := srv.Client(t)
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{"+t.Name()+"}:queue") == 1
	})
	require.NoError(t, first.Unlock())
	w := <-writer
	require.NotNil(t, w)

	_, err = m.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "readers wait for the handed writer")
	_, err = m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "writers wait for the handed writer")
	r, err := other.RLock(w.Context())
	require.NoError(t, err, "the handed writer downgrades")
	require.NoError(t, w.Unlock())
	joined, err := m.TryRLock(ctx)
	require.NoError(t, err, "the downgraded lock is read-locked")
	_, err = m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "by two readers")
	require.NoError(t, joined.Unlock())
	require.NoError(t, r.Unlock())
	last, err := m.TryLock(ctx)
	require.NoError(t, err, "free once the readers left")
	require.NoError(t, last.Unlock())
}
