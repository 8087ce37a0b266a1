package relocktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/relocktest"
	"github.com/relockgo/relock/rwlock"
	"github.com/relockgo/relock/semaphore"
)

// Every Client, connection and server a test made is closed by its cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The keys of lock "job" under the default prefix.
const (
	lockKey  = "relock:{job}"
	queueKey = lockKey + ":queue"
	wakeKey  = lockKey + ":wake"
)

// wait bounds every wait for a condition: long enough for a loaded machine.
const wait = 20 * time.Second

// kinds are the lock kinds, each as a relock.Locker: the kind-level
// behaviours below run on every one.
var kinds = []struct {
	name string
	new  func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker
}{
	{"mutex", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return mutex.New(c, name, opts...)
	}},
	{"reentrant", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return reentrant.New(c, name, opts...)
	}},
	{"fair", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return fair.New(c, name, opts...)
	}},
	{"rwlock-write", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return rwlock.New(c, name, opts...).Locker()
	}},
	{"rwlock-read", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return rwlock.New(c, name, opts...).RLocker()
	}},
	{"semaphore", func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return permit{semaphore.New(c, name, 1, opts...)}
	}},
}

// permit is a semaphore of one permit as a relock.Locker.
type permit struct{ s *semaphore.Semaphore }

func (p permit) Lock(ctx context.Context) (*relock.Lease, error)    { return p.s.Acquire(ctx, 1) }
func (p permit) TryLock(ctx context.Context) (*relock.Lease, error) { return p.s.TryAcquire(ctx, 1) }

// admin returns a plain Redis client of srv, closed at cleanup.
func admin(t *testing.T, srv *relocktest.Server) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{srv.Addr()},
		ForceSingleClient: true,
		AlwaysRESP2:       true,
		DisableCache:      true,
	})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

func do(t *testing.T, rc rueidis.Client, cmd rueidis.Completed) rueidis.RedisResult {
	t.Helper()
	r := rc.Do(context.Background(), cmd)
	require.NoError(t, r.Error())
	return r
}

func numsub(t *testing.T, rc rueidis.Client, channel string) int64 {
	t.Helper()
	v, err := do(t, rc, rc.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
	require.NoError(t, err)
	return v[channel]
}

// lockAsync runs l.Lock in a goroutine; the lease or error arrives on the
// channel.
func lockAsync(l relock.Locker) <-chan result {
	got := make(chan result, 1)
	go func() {
		lease, err := l.Lock(context.Background())
		got <- result{lease, err}
	}()
	return got
}

type result struct {
	lease *relock.Lease
	err   error
}

func receive(t *testing.T, got <-chan result, what string) *relock.Lease {
	t.Helper()
	select {
	case r := <-got:
		require.NoError(t, r.err, what)
		return r.lease
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func done(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// shares reports whether the kind lets a second Client's TryLock in while
// the first holds it (readers share).
func shares(kind string) bool { return kind == "rwlock-read" }

func TestExclusionAndTokens(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			a, b := k.new(srv.Client(t), "job"), k.new(srv.Client(t), "job")
			ctx := context.Background()
			first, err := a.Lock(ctx)
			require.NoError(t, err)
			other, err := b.TryLock(ctx)
			if shares(k.name) {
				require.NoError(t, err, "readers share")
				require.NoError(t, other.Unlock())
			} else {
				require.ErrorIs(t, err, relock.ErrNotAcquired)
			}
			require.NoError(t, first.Unlock())
			assert.ErrorIs(t, first.Unlock(), relock.ErrNotHeld)
			second, err := b.TryLock(ctx)
			require.NoError(t, err, "free after Unlock")
			assert.Greater(t, second.Token(), first.Token(), "tokens increase")
			require.NoError(t, second.Unlock())
		})
	}
}

func TestWaiterWokenByUnlock(t *testing.T) {
	for _, k := range kinds {
		if shares(k.name) {
			continue // readers do not wait for readers
		}
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			rc := admin(t, srv)
			holder, err := k.new(srv.Client(t), "job").Lock(context.Background())
			require.NoError(t, err)

			// Listen on the wake-up channels beside the waiter: the lock's,
			// and its Clients', on which a hand-over names the waiter.
			ctx, cancel := context.WithCancel(context.Background())
			msgs := make(chan rueidis.PubSubMessage, 16)
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				rc.Receive(ctx, rc.B().Psubscribe().Pattern(wakeKey+"*").Build(), func(m rueidis.PubSubMessage) {
					select {
					case msgs <- m:
					default:
					}
				})
			}()
			t.Cleanup(func() { cancel(); <-stopped })

			got := lockAsync(k.new(srv.Client(t), "job"))
			locktest.Eventually(t, "the waiter and the listener to subscribe", func() bool {
				n, err := do(t, rc, rc.B().PubsubNumpat().Build()).AsInt64()
				require.NoError(t, err)
				return numsub(t, rc, wakeKey) == 1 && n == 3 // the holder's and the waiter's Clients' patterns, and ours
			})
			require.NoError(t, holder.Unlock())
			select {
			case <-msgs:
			case <-time.After(wait):
				t.Fatal("Unlock published no wake-up")
			}
			next := receive(t, got, "the waiter to acquire")
			assert.Greater(t, next.Token(), holder.Token())
			require.NoError(t, next.Unlock())
		})
	}
}

func TestWatchdogRenews(t *testing.T) {
	const lease = 300 * time.Millisecond
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			l, err := k.new(srv.Client(t, relock.WithWatchdogTimeout(lease)), "job").Lock(context.Background())
			require.NoError(t, err)
			// The key expires on the wall clock: without renewals it would
			// be gone after one lease.
			for start := time.Now(); time.Since(start) < 5*lease; {
				select {
				case <-l.Context().Done():
					t.Fatalf("lease lost: %v", context.Cause(l.Context()))
				case <-time.After(lease / 4):
				}
			}
			rc := admin(t, srv)
			n, err := do(t, rc, rc.B().Exists().Key(lockKey).Build()).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "the lock outlived five leases")
			require.NoError(t, l.Unlock())
		})
	}
}

func TestFixedLeaseExpires(t *testing.T) {
	const lease = 200 * time.Millisecond
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			l, err := k.new(srv.Client(t), "job", relock.WithLease(lease)).Lock(context.Background())
			require.NoError(t, err)
			done(t, l.Context(), "the fixed lease to end")
			assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
			// Writers wait for the expired reader too: the next owner of
			// every kind gets it once the server expired it.
			next := receive(t, lockAsync(rwWriterOr(k.name, k.new)(srv.Client(t), "job")), "the next owner")
			assert.Greater(t, next.Token(), l.Token())
			require.NoError(t, next.Unlock())
			assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
		})
	}
}

// rwWriterOr returns the writer side for the read-write lock's reader
// kind, so that a test's next owner excludes the one before; new otherwise.
func rwWriterOr(kind string, new func(*relock.Client, string, ...relock.LockOption) relock.Locker) func(*relock.Client, string, ...relock.LockOption) relock.Locker {
	if !shares(kind) {
		return new
	}
	return func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker {
		return rwlock.New(c, name, opts...).Locker()
	}
}

func TestFastForwardExpiresFixedLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			rc := admin(t, srv)
			l, err := k.new(srv.Client(t), "job", relock.WithLease(time.Hour)).Lock(context.Background())
			require.NoError(t, err)
			got := lockAsync(rwWriterOr(k.name, k.new)(srv.Client(t), "job"))
			locktest.Eventually(t, "the waiter to subscribe", func() bool { return numsub(t, rc, wakeKey) == 1 })

			srv.FastForward(time.Hour)
			next := receive(t, got, "the waiter to acquire after the fast-forward")
			assert.Greater(t, next.Token(), l.Token())
			// The holder's clock did not move: it still believes it holds
			// the lock, as a holder paused for an hour would.
			assert.NoError(t, l.Context().Err())
			assert.True(t, time.Now().Before(l.ValidUntil()))
			require.NoError(t, next.Unlock())
			assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
		})
	}
}

func TestFastForwardLosesWatchdogLease(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := relocktest.NewServer(t)
			l, err := k.new(srv.Client(t, relock.WithWatchdogTimeout(time.Second)), "job").Lock(context.Background())
			require.NoError(t, err)
			srv.FastForward(time.Second)
			done(t, l.Context(), "the next renewal to find the lock gone")
			assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
		})
	}
}

// FastForward moves TIME with the TTLs: a reader's deadline, stored on the
// server's clock, passes while the lock's key, kept alive by another
// reader, does not expire.
func TestFastForwardPassesServerDeadlines(t *testing.T) {
	srv := relocktest.NewServer(t)
	rc := admin(t, srv)
	ctx := context.Background()
	timeOf := func() time.Time {
		v, err := do(t, rc, rc.B().Time().Build()).AsStrSlice()
		require.NoError(t, err)
		sec, err := strconv.ParseInt(v[0], 10, 64)
		require.NoError(t, err)
		usec, err := strconv.ParseInt(v[1], 10, 64)
		require.NoError(t, err)
		return time.Unix(sec, usec*1000)
	}
	before := timeOf()

	dead, err := rwlock.New(srv.Client(t), "job", relock.WithLease(time.Minute)).RLock(ctx)
	require.NoError(t, err)
	live, err := rwlock.New(srv.Client(t), "job", relock.WithLease(time.Hour)).RLock(ctx)
	require.NoError(t, err)
	writer := rwlock.New(srv.Client(t), "job")

	srv.FastForward(2 * time.Minute)
	assert.False(t, timeOf().Before(before.Add(2*time.Minute)), "TIME moved")
	_, err = writer.TryLock(ctx)
	require.ErrorIs(t, err, relock.ErrNotAcquired, "the live reader holds")
	require.NoError(t, live.Unlock())
	// Only the dead reader's deadline, passed on the server's clock, can
	// free the lock now: its key's TTL is still an hour.
	w, err := writer.TryLock(ctx)
	require.NoError(t, err, "the dead reader's deadline passed")
	assert.Greater(t, w.Token(), dead.Token(), "tokens keep increasing")
	require.NoError(t, w.Unlock())
}

func TestReentrantCallChain(t *testing.T) {
	srv := relocktest.NewServer(t)
	m := reentrant.New(srv.Client(t), "job")
	other := reentrant.New(srv.Client(t), "job")
	ctx := context.Background()

	outer, err := m.Lock(ctx)
	require.NoError(t, err)
	inner, err := m.Lock(outer.Context())
	require.NoError(t, err, "the call chain re-enters")
	assert.Equal(t, outer.Token(), inner.Token())
	n, err := m.HoldCount(inner.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	_, err = other.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "another chain is excluded")
	require.NoError(t, inner.Unlock())
	require.NoError(t, outer.Unlock())
	l, err := other.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock())

	mu := mutex.New(srv.Client(t), "plain")
	held, err := mu.Lock(ctx)
	require.NoError(t, err)
	_, err = mu.Lock(held.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock, "a mutex is not reentrant")
	require.NoError(t, held.Unlock())
}

func TestFairGrantsInArrivalOrder(t *testing.T) {
	srv := relocktest.NewServer(t)
	rc := admin(t, srv)
	m := fair.New(srv.Client(t), "job")
	holder, err := m.Lock(context.Background())
	require.NoError(t, err)

	const n = 5
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Lock(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Unlock(); err != nil {
				t.Error(err)
			}
		}()
		locktest.Eventually(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool {
			return locktest.QueueLen(context.Background(), rc, queueKey) == i+1
		})
	}
	require.NoError(t, holder.Unlock())
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
}

func TestRWLockReadersAndWriters(t *testing.T) {
	srv := relocktest.NewServer(t)
	rc := admin(t, srv)
	m := rwlock.New(srv.Client(t), "job")
	other := rwlock.New(srv.Client(t), "job")
	ctx := context.Background()

	r1, err := m.RLock(ctx)
	require.NoError(t, err)
	r2, err := other.TryRLock(ctx)
	require.NoError(t, err, "readers share")
	_, err = m.Lock(r1.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock, "a reader may not upgrade")
	got := lockAsync(other.Locker())
	locktest.Eventually(t, "the writer to wait", func() bool {
		return locktest.QueueLen(context.Background(), rc, queueKey) == 1
	})
	_, err = m.TryRLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "a waiting writer holds back new readers")
	again, err := m.RLock(r1.Context())
	require.NoError(t, err, "but not a reader re-entering its chain")
	n, err := m.HoldCount(again.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, again.Unlock())
	require.NoError(t, r1.Unlock())
	require.NoError(t, r2.Unlock())

	w := receive(t, got, "the writer to acquire once the readers left")
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	down, err := other.RLock(w.Context())
	require.NoError(t, err, "a writer may take the read side (downgrade)")
	require.NoError(t, w.Unlock())
	_, err = m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the downgraded reader holds")
	r3, err := m.TryRLock(ctx)
	require.NoError(t, err, "and other readers join it")
	require.NoError(t, r3.Unlock())
	require.NoError(t, down.Unlock())
}

func TestIsLockedAndForceUnlock(t *testing.T) {
	srv := relocktest.NewServer(t)
	c := srv.Client(t, relock.WithWatchdogTimeout(time.Second))
	m := mutex.New(c, "job")
	ctx := context.Background()
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced)
	done(t, l.Context(), "the holder to learn of the loss")
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
}

func TestCleanupClosesEverything(t *testing.T) {
	var (
		addr string
		c    *relock.Client
	)
	t.Run("user", func(t *testing.T) {
		srv := relocktest.NewServer(t)
		addr = srv.Addr()
		c = srv.Client(t)
		_, err := mutex.New(c, "job").Lock(context.Background())
		require.NoError(t, err)
	})
	_, err := mutex.New(c, "job").TryLock(context.Background())
	assert.ErrorIs(t, err, relock.ErrClosed, "the Client is closed")
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "the server is shut down")
	// goleak in TestMain checks that nothing else is left running.
}

func TestNew(t *testing.T) {
	c := relocktest.New(t, relock.WithKeyPrefix("app"))
	l, err := mutex.New(c, "job").TryLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, l.Unlock())

	ok := t.Run("invalid option", func(t *testing.T) {
		ft := &fatalRecorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			relocktest.New(ft, relock.WithKeyPrefix(""))
		}()
		assert.True(t, ft.fatal, "an invalid option fails the test")
		assert.Contains(t, ft.msg, "key prefix")
	})
	assert.True(t, ok)
}

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	fatal bool
	msg   string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }

func (f *fatalRecorder) Fatal(args ...any) {
	f.fatal = true
	f.msg = fmt.Sprint(args...)
	panic("fatal") // ends New, as runtime.Goexit would
}

func TestStartAndClose(t *testing.T) {
	srv, err := relocktest.Start()
	require.NoError(t, err)
	c, err := srv.NewClient()
	require.NoError(t, err)
	l, err := mutex.New(c, "job").Lock(context.Background())
	require.NoError(t, err)

	srv.Close()
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrClosed, "Close closed the Client")
	_, err = srv.NewClient()
	assert.Error(t, err, "no Client after Close")
	srv.Close() // idempotent
}

// A semaphore on the embedded server: permits counted and handed on to a
// waiter in arrival order, and a fixed lease's permits back at FastForward.
func TestSemaphore(t *testing.T) {
	srv := relocktest.NewServer(t)
	ctx := context.Background()
	s := semaphore.New(srv.Client(t), "pool", 3, relock.WithLease(time.Minute))
	held, err := s.Acquire(ctx, 2)
	require.NoError(t, err)
	one, err := s.Acquire(ctx, 1)
	require.NoError(t, err)
	n, err := s.Available(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	got := make(chan *relock.Lease, 1)
	go func() {
		l, err := semaphore.New(srv.Client(t), "pool", 3).Acquire(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	rc := admin(t, srv)
	locktest.Eventually(t, "the waiter to queue", func() bool {
		return locktest.QueueLen(ctx, rc, "relock:{pool}:queue") == 1
	})
	srv.FastForward(2 * time.Minute) // both holdings expire on the server
	select {
	case l := <-got:
		require.NotNil(t, l)
		assert.Greater(t, l.Token(), one.Token())
		require.NoError(t, l.Unlock())
	case <-time.After(wait):
		t.Fatal("the waiter did not get the expired holdings' permits")
	}
	assert.ErrorIs(t, held.Unlock(), relock.ErrLockLost)
	assert.ErrorIs(t, one.Unlock(), relock.ErrLockLost)
}

// TestSemaphoreAttemptsAcrossHolderExpiry acquires a semaphore again and
// again as its holder's fixed lease runs out: every attempt answers
// (granted or not, never an error), and the permit comes back.
func TestSemaphoreAttemptsAcrossHolderExpiry(t *testing.T) {
	srv := relocktest.NewServer(t)
	c := srv.Client(t)
	for i := range 100 {
		name := fmt.Sprintf("expiring-%d", i)
		// A lease this short may lapse before its grant's reply arrives on
		// a loaded machine; Acquire then tries again, until ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		held, err := semaphore.New(c, name, 1, relock.WithLease(20*time.Millisecond)).Acquire(ctx, 1)
		cancel()
		require.NoError(t, err)
		attempts := semaphore.New(c, name, 1, relock.WithLease(time.Minute))
		locktest.Eventually(t, "the expired holder's permit to come back", func() bool {
			l, err := attempts.TryAcquire(context.Background(), 1)
			if errors.Is(err, relock.ErrNotAcquired) {
				return false
			}
			require.NoError(t, err, "an attempt as the holder's lease ends")
			require.NoError(t, l.Unlock())
			return true
		})
		assert.ErrorIs(t, held.Unlock(), relock.ErrLockLost)
	}
}
