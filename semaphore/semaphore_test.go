package semaphore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/semaphore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// queueKey is the key of semaphore name's queue under the default prefix.
func queueKey(name string) string { return "relock:{" + name + "}:queue" }

// llen returns how many waiters the queue key holds.
func llen(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	ws, err := locktest.Queue(context.Background(), rc, key)
	require.NoError(t, err)
	return int64(len(ws))
}

// setup returns a Client on the shared server, a plain client of it, and
// a unique name.
func setup(t *testing.T, opts ...relock.Option) (*relock.Client, rueidis.Client, string) {
	t.Helper()
	rc := redistest.Shared(t).Client(t)
	return locktest.Client(t, rc, opts...), rc, t.Name()
}

func available(t *testing.T, s *semaphore.Semaphore) int64 {
	t.Helper()
	n, err := s.Available(context.Background())
	require.NoError(t, err)
	return n
}

func unlock(t *testing.T, l *relock.Lease) {
	t.Helper()
	require.NoError(t, l.Unlock())
}

// Ports RedissonSemaphoreTest.testAcquire / testReleaseAcquire: permits
// taken and given back are counted, by one holding or several.
func TestAcquireAndReleaseCountPermits(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 10)
	assert.Equal(t, int64(10), available(t, s))
	a, err := s.Acquire(ctx, 3)
	require.NoError(t, err)
	b, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(6), available(t, s))
	unlock(t, a)
	assert.Equal(t, int64(9), available(t, s))
	unlock(t, b)
	assert.Equal(t, int64(10), available(t, s))
	assert.ErrorIs(t, b.Unlock(), relock.ErrNotHeld)
}

// Ports RedissonSemaphoreTest.testTryAcquire and
// RedissonPermitExpirableSemaphoreTest.testTryAcquire: an attempt fails
// when the permits asked do not fit, and succeeds when they do.
func TestTryAcquireFailsWhenTheyDoNotFit(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 3)
	a, err := s.TryAcquire(ctx, 2)
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx, 2)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	b, err := s.TryAcquire(ctx, 1)
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.Equal(t, int64(0), available(t, s))
	unlock(t, a)
	unlock(t, b)
}

// Bad input fails at once with ErrInvalid, never with a wait that cannot
// end (RedissonSemaphoreTest.testTrySetPermits's negative and zero cases).
func TestBadInputIsInvalid(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		size, n int64
	}{{3, 0}, {3, -1}, {3, 4}, {0, 1}, {-2, 1}} {
		s := semaphore.New(c, name, tc.size)
		_, err := s.Acquire(ctx, tc.n)
		assert.ErrorIs(t, err, relock.ErrInvalid, "size %d, n %d", tc.size, tc.n)
		_, err = s.TryAcquire(ctx, tc.n)
		assert.ErrorIs(t, err, relock.ErrInvalid, "size %d, n %d", tc.size, tc.n)
	}
	_, err := semaphore.New(c, name, 0).Available(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	_, err = semaphore.New(c, "", 1).Acquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrInvalid)
}

// Ports RedissonSemaphoreTest.testTrySetPermits (a set size is kept while
// in use) as the contract has it: while permits are held, another size is
// refused; with none held, the new size holds.
func TestSizeDisagreementIsInvalidWhileHeld(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	five, nine := semaphore.New(c, name, 5), semaphore.New(c, name, 9)
	l, err := five.Acquire(ctx, 4)
	require.NoError(t, err)
	_, err = nine.Acquire(ctx, 3)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	_, err = nine.TryAcquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	_, err = nine.Available(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	unlock(t, l)

	l, err = nine.Acquire(ctx, 9)
	require.NoError(t, err, "none held: the new size holds")
	_, err = five.TryAcquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrInvalid)
	unlock(t, l)
}

// Ports RedissonSemaphoreTest.testBlockingAcquire: an Acquire that waits
// is woken by the release that frees its permits.
func TestAcquireIsWokenByRelease(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 1)
	held, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := s.Acquire(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// The release must come after the waiter queued, so that it is the
	// release that hands it the permit.
	_, rc, _ := setup(t)
	locktest.Eventually(t, "the waiter to queue", func() bool { return llen(t, rc, queueKey(name)) == 1 })
	unlock(t, held)
	select {
	case l := <-got:
		require.NotNil(t, l)
		assert.Greater(t, l.Token(), held.Token())
		unlock(t, l)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted the permit")
	}
}

// FIFO: a waiter for 3 that arrived before waiters for 1 is served first,
// although a single permit is free before three are.
func TestWaiterForMoreIsNotOvertaken(t *testing.T) {
	c, rc, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 3)
	first, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	second, err := s.Acquire(ctx, 1)
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	wait := func(label string, n int64) {
		defer wg.Done()
		l, err := s.Acquire(ctx, n)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, label)
		mu.Unlock()
		if err := l.Unlock(); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go wait("three", 3)
	locktest.Eventually(t, "the waiter for 3 to queue", func() bool { return llen(t, rc, queueKey(name)) == 1 })
	for i := range 3 {
		wg.Add(1)
		go wait("one", 1)
		locktest.Eventually(t, "a waiter for 1 to queue", func() bool { return llen(t, rc, queueKey(name)) == int64(i+2) })
	}
	// One permit free: the waiters for 1 behind the waiter for 3 must not
	// take it.
	unlock(t, second)
	time.Sleep(100 * time.Millisecond) // room for an overtaking grant, if one could happen
	mu.Lock()
	assert.Empty(t, order, "a waiter for 1 overtook the waiter for 3")
	mu.Unlock()
	unlock(t, first)
	wg.Wait()
	assert.Equal(t, []string{"three", "one", "one", "one"}, order)
}

// A release hands permits to as many head waiters as fit, in one go: a
// holding of 3 given back lets three waiters for 1 in.
func TestReleaseHandsOnToAllThatFit(t *testing.T) {
	c, rc, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 3)
	all, err := s.Acquire(ctx, 3)
	require.NoError(t, err)
	got := make(chan *relock.Lease, 3)
	for i := range 3 {
		go func() {
			l, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		locktest.Eventually(t, "a waiter to queue", func() bool { return llen(t, rc, queueKey(name)) == int64(i+1) })
	}
	unlock(t, all)
	tokens := map[int64]bool{}
	for range 3 {
		l := <-got
		require.NotNil(t, l)
		assert.Greater(t, l.Token(), all.Token())
		tokens[l.Token()] = true
		defer unlock(t, l)
	}
	assert.Len(t, tokens, 3, "each grant has its own token")
	assert.Equal(t, int64(0), available(t, s))
}

// Not reentrant: an Acquire under a holding's Context takes new permits.
func TestAcquireUnderALeaseTakesNewPermits(t *testing.T) {
	c, rc, name := setup(t)
	s := semaphore.New(c, name, 2)
	a, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	b, err := s.Acquire(a.Context(), 1)
	require.NoError(t, err)
	assert.NotEqual(t, a.Token(), b.Token())
	assert.Equal(t, int64(0), available(t, s))
	ctx, cancel := context.WithTimeout(a.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = s.Acquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "all permits held: it waits, even for itself")
	// The waiter that gave up leaves the queue in the background; a
	// release before that would hand it a permit, which its withdrawal
	// then gives back.
	locktest.Eventually(t, "the waiter that gave up to leave the queue", func() bool { return llen(t, rc, queueKey(name)) == 0 })
	unlock(t, b)
	unlock(t, a)
	assert.Equal(t, int64(2), available(t, s))
}

// A waiter whose ctx ends leaves the queue at once: the waiter behind it,
// for fewer, is let in if its permits are free.
func TestWaiterThatGivesUpLetsTheNextIn(t *testing.T) {
	c, rc, name := setup(t)
	s := semaphore.New(c, name, 3)
	held, err := s.Acquire(context.Background(), 2)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, 3)
		gaveUp <- err
	}()
	locktest.Eventually(t, "the waiter for 3 to queue", func() bool { return llen(t, rc, queueKey(name)) == 1 })
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := s.Acquire(context.Background(), 1)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	locktest.Eventually(t, "the waiter for 1 to queue", func() bool { return llen(t, rc, queueKey(name)) == 2 })
	cancel()
	assert.ErrorIs(t, <-gaveUp, relock.ErrNotAcquired)
	select {
	case l := <-got:
		require.NotNil(t, l)
		unlock(t, l)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter for 1 was not let in")
	}
	unlock(t, held)
}

// Tokens strictly increase across the semaphore's grants, whichever
// holding they are for.
func TestTokensIncrease(t *testing.T) {
	c, _, name := setup(t)
	s := semaphore.New(c, name, 4)
	var last int64
	var held []*relock.Lease
	for i := range 12 {
		l, err := s.Acquire(context.Background(), 1+int64(i%2))
		require.NoError(t, err)
		assert.Greater(t, l.Token(), last)
		last = l.Token()
		held = append(held, l)
		if len(held) == 2 {
			unlock(t, held[0])
			held = held[1:]
		}
	}
	for _, l := range held {
		unlock(t, l)
	}
}

// Ports RedissonPermitExpirableSemaphoreTest.testExpiration /
// testExpire: a permit taken with a fixed lease comes back when the
// lease expires, and the holder's Context says it was lost.
func TestFixedLeaseExpiryReturnsPermits(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 2, relock.WithLease(300*time.Millisecond))
	l, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	start := time.Now()
	next, err := s.Acquire(ctx, 2) // woken by nobody: the holding's expiry lets it in
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	// Far below the waiter's 5 s cap on a sleep: the expiry, not the cap,
	// let it in.
	assert.Less(t, time.Since(start), 4*time.Second)
	assert.Greater(t, next.Token(), l.Token())
	select {
	case <-l.Context().Done():
		assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
	case <-time.After(20 * time.Second):
		t.Fatal("the expired holding's Context was not canceled")
	}
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
	unlock(t, next)
}

// Ports RedissonPermitExpirableSemaphoreTest.testUpdateLeaseTime: Extend
// lengthens a fixed lease's holding; it is not lost at its first expiry.
func TestExtendKeepsAFixedHolding(t *testing.T) {
	c, _, name := setup(t)
	ctx := context.Background()
	s := semaphore.New(c, name, 1, relock.WithLease(200*time.Millisecond))
	l, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, 20*time.Second))
	time.Sleep(400 * time.Millisecond) // past the first lease
	_, err = s.TryAcquire(ctx, 1)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.NoError(t, l.Context().Err())
	unlock(t, l)
}

// ForceUnlock frees every permit and wakes the waiters; the holders'
// Contexts are canceled at their next renewal.
func TestForceUnlockFreesEveryPermit(t *testing.T) {
	c, rc, name := setup(t, relock.WithWatchdogTimeout(600*time.Millisecond))
	ctx := context.Background()
	s := semaphore.New(c, name, 2)
	a, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	b, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := s.Acquire(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	locktest.Eventually(t, "the waiter to queue", func() bool { return llen(t, rc, queueKey(name)) == 1 })
	held, err := s.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	var l *relock.Lease
	select {
	case l = <-got:
		require.NotNil(t, l)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not let in")
	}
	for _, old := range []*relock.Lease{a, b} {
		select {
		case <-old.Context().Done():
			assert.ErrorIs(t, context.Cause(old.Context()), relock.ErrLockLost)
		case <-time.After(20 * time.Second):
			t.Fatal("a forced-out holder's Context was not canceled")
		}
	}
	unlock(t, l)
	assert.Equal(t, int64(2), available(t, s))
}

// Permits of holders that vanished without Unlock come back after their
// lease: a Client closed without releasing (its process "died") stands in.
func TestDeadHoldersPermitsReturn(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	name := t.Name()
	// A dead process's holding: its renewals stop, and it never releases.
	dead := semaphore.New(locktest.Client(t, rc), name, 3, relock.WithLease(500*time.Millisecond))
	l, err := dead.Acquire(context.Background(), 3)
	require.NoError(t, err)
	_ = l // never unlocked

	s := semaphore.New(locktest.Client(t, rc), name, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	got, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 4*time.Second, "the lease's expiry, not the waiter's 5 s cap, let it in")
	assert.Equal(t, int64(1), available(t, s))
	unlock(t, got)
}
