package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/redlock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// clients returns one Client per server, each closed at cleanup.
func clients(t *testing.T, srvs []*redistest.Server, opts ...relock.Option) []*relock.Client {
	t.Helper()
	cs := make([]*relock.Client, len(srvs))
	for i, s := range srvs {
		cs[i] = locktest.Client(t, s.Client(t), opts...)
	}
	return cs
}

func TestLockUnlockAndExclusion(t *testing.T) {
	srvs := redistest.NewN(t, 5)
	a := redlock.New(clients(t, srvs), t.Name())
	b := redlock.New(clients(t, srvs), t.Name())
	ctx := context.Background()

	l, err := a.Lock(ctx)
	require.NoError(t, err)
	locked, err := b.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	_, err = b.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	_, err = a.Lock(l.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock)
	assert.True(t, time.Now().Before(l.ValidUntil()))

	got := make(chan *relock.Lease)
	go func() {
		l2, err := b.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	require.NoError(t, l.Unlock())
	l2 := <-got
	require.NotNil(t, l2)
	assert.Greater(t, l2.Token(), l.Token())
	require.NoError(t, l2.Unlock())
	locked, err = a.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

func TestCounterAcrossGoroutines(t *testing.T) {
	srvs := redistest.NewN(t, 5)
	var locks []*redlock.Mutex
	for range 2 {
		locks = append(locks, redlock.New(clients(t, srvs), t.Name()))
	}
	var mu sync.Mutex
	counter, inside := 0, 0
	var last int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				l, err := locks[g%2].Lock(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				if inside != 1 {
					t.Error("two holders at once")
				}
				if l.Token() <= last {
					t.Errorf("token %d after %d", l.Token(), last)
				}
				last = l.Token()
				counter++
				inside--
				mu.Unlock()
				if err := l.Unlock(); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 160, counter)
}

func TestMinorityDownStillLocks(t *testing.T) {
	srvs := redistest.NewN(t, 5)
	m := redlock.New(clients(t, srvs), t.Name())
	ctx := context.Background()
	srvs[0].Stop(t)
	srvs[1].Pause(t)
	defer srvs[1].Resume(t)
	l, err := m.TryLock(ctx)
	require.NoError(t, err, "3 of 5 masters answer")
	require.NoError(t, l.Unlock())
	srvs[2].Stop(t)
	_, err = m.TryLock(ctx)
	require.Error(t, err, "2 of 5 masters answer")
	assert.False(t, errors.Is(err, relock.ErrNotAcquired), "nobody holds it: %v", err)
	assert.ErrorIs(t, err, relock.ErrUnavailable, "too few masters answered")
}

func TestBadInput(t *testing.T) {
	srvs := redistest.NewN(t, 2)
	cs := clients(t, srvs)
	other := locktest.Client(t, srvs[1].Client(t), relock.WithKeyPrefix("other"))
	ctx := context.Background()
	for _, nodes := range [][]*relock.Client{nil, {}, {cs[0], nil}, {nil, cs[0]}, {cs[0], cs[0]}, {cs[0], cs[1], cs[0]}, {cs[0], other}} {
		m := redlock.New(nodes, "x")
		_, err := m.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid, "TryLock over %d nodes", len(nodes))
		_, err = m.Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid, "Lock over %d nodes", len(nodes))
		_, err = m.IsLocked(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid, "IsLocked over %d nodes", len(nodes))
		_, err = m.ForceUnlock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid, "ForceUnlock over %d nodes", len(nodes))
	}
	for _, opt := range []relock.LockOption{relock.WithNodeTimeout(0), relock.WithNodeTimeout(-time.Second), relock.WithLease(time.Millisecond)} {
		_, err := redlock.New(cs, "x", opt).TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrInvalid)
	}
	_, err := redlock.New(cs, "").TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrInvalid)
}

// TestOneNodeIsAMutex checks that a redlock over one master behaves as
// package mutex does: exclusion, ErrNotAcquired, ErrWouldDeadlock in the
// holder's call chain, increasing tokens, and no lock without its master.
func TestOneNodeIsAMutex(t *testing.T) {
	srv := redistest.New(t)
	a := redlock.New(clients(t, []*redistest.Server{srv}), t.Name())
	b := redlock.New(clients(t, []*redistest.Server{srv}), t.Name())
	ctx := context.Background()

	l, err := a.Lock(ctx)
	require.NoError(t, err)
	_, err = b.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	_, err = a.Lock(l.Context())
	assert.ErrorIs(t, err, relock.ErrWouldDeadlock)
	locked, err := b.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = b.Lock(wctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, l.Unlock())
	assert.ErrorIs(t, l.Unlock(), relock.ErrNotHeld)

	l2, err := b.TryLock(ctx)
	require.NoError(t, err)
	assert.Greater(t, l2.Token(), l.Token())
	require.NoError(t, l2.Unlock())

	srv.Stop(t)
	_, err = a.TryLock(ctx)
	assert.Error(t, err, "the one master is down")
}

// TestWaiterWokenByUnlock checks that a Lock waiting on a held redlock is
// woken by the Unlock through the masters' wake-up subscriptions, not by
// its fallback timer: the holder's lease is long (30s), so without a
// wake-up the waiter would sleep 2.5 to 5s before its next attempt. With
// the first master (that of the holder's Client) down, the others' wake-ups
// still come.
func TestWaiterWokenByUnlock(t *testing.T) {
	for _, down := range []int{-1, 0} {
		t.Run(fmt.Sprintf("down=%d", down), func(t *testing.T) {
			srvs := redistest.NewN(t, 5)
			name := t.Name()
			a, b := redlock.New(clients(t, srvs), name), redlock.New(clients(t, srvs), name)
			raw := make([]rueidis.Client, len(srvs))
			for i, s := range srvs {
				raw[i] = s.Client(t)
			}
			ctx := context.Background()
			l, err := a.Lock(ctx)
			require.NoError(t, err)
			if down >= 0 {
				srvs[down].Stop(t)
			}

			type result struct {
				l   *relock.Lease
				err error
				at  time.Time
			}
			got := make(chan result, 1)
			go func() {
				l, err := b.Lock(ctx)
				got <- result{l, err, time.Now()}
			}()
			// The waiter has subscribed on every master that is up.
			wake := relock.DefaultKeyPrefix + ":{" + name + "}:wake"
			for i, rc := range raw {
				if i == down {
					continue
				}
				locktest.Eventually(t, fmt.Sprintf("a wake-up subscription on master %d", i), func() bool {
					m, err := rc.Do(ctx, rc.B().PubsubNumsub().Channel(wake).Build()).AsIntMap()
					return err == nil && m[wake] > 0
				})
			}
			select {
			case r := <-got:
				t.Fatalf("Lock returned while the lock was held: %v", r.err)
			default:
			}

			released := time.Now()
			require.NoError(t, l.Unlock())
			r := <-got
			require.NoError(t, r.err)
			woke := r.at.Sub(released)
			t.Logf("the waiter got the lock %v after the Unlock began", woke)
			assert.Less(t, woke, 2*time.Second, "woken by the release, not by its 2.5–5s timer")
			assert.Greater(t, r.l.Token(), l.Token())
			require.NoError(t, r.l.Unlock())
		})
	}
}

// TestForceUnlock checks that ForceUnlock frees the lock on every master
// whoever holds it, and that the holder then loses its lease.
func TestForceUnlock(t *testing.T) {
	srvs := redistest.NewN(t, 3)
	const lease = 600 * time.Millisecond
	a := redlock.New(clients(t, srvs, relock.WithWatchdogTimeout(lease)), t.Name())
	admin := redlock.New(clients(t, srvs), t.Name())
	ctx := context.Background()
	l, err := a.Lock(ctx)
	require.NoError(t, err)
	held, err := admin.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	locked, err := admin.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
	locktest.Eventually(t, "the holder learns it lost the lock", func() bool { return l.Context().Err() != nil })
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
	assert.ErrorIs(t, l.Unlock(), relock.ErrLockLost)
	held, err = admin.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, held)
	l2, err := admin.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l2.Unlock())
}

// TestIsLockedNeedsMajority checks that IsLocked counts the masters that
// hold the lock: a minority holding it is not a lock.
func TestIsLockedNeedsMajority(t *testing.T) {
	srvs := redistest.NewN(t, 5)
	name := t.Name()
	m := redlock.New(clients(t, srvs), name)
	ctx := context.Background()
	for i, s := range srvs {
		rc := s.Client(t)
		require.NoError(t, rc.Do(ctx, rc.B().Set().Key(relock.DefaultKeyPrefix+":{"+name+"}").Value("someone").Build()).Error())
		locked, err := m.IsLocked(ctx)
		require.NoError(t, err)
		assert.Equal(t, i+1 >= 3, locked, "held on %d masters of 5", i+1)
		l, err := m.TryLock(ctx)
		if i+1 >= 3 {
			assert.ErrorIs(t, err, relock.ErrNotAcquired, "held on %d masters of 5", i+1)
		} else if assert.NoError(t, err, "held by another on %d masters of 5", i+1) {
			require.NoError(t, l.Unlock())
		}
	}
}

// TestFixedLeaseExpires checks a WithLease redlock: not renewed, it ends
// with ErrLockLost at its ValidUntil, and another owner gets the lock once
// it expired on the masters; Extend pushes ValidUntil out.
func TestFixedLeaseExpires(t *testing.T) {
	srvs := redistest.NewN(t, 3)
	const lease = 500 * time.Millisecond
	a := redlock.New(clients(t, srvs), t.Name(), relock.WithLease(lease))
	b := redlock.New(clients(t, srvs), t.Name())
	ctx := context.Background()
	l, err := a.Lock(ctx)
	require.NoError(t, err)
	first := l.ValidUntil()
	require.NoError(t, l.Extend(ctx, 2*lease))
	assert.True(t, l.ValidUntil().After(first), "Extend moved ValidUntil")
	<-l.Context().Done()
	assert.False(t, time.Now().Before(l.ValidUntil()), "the lease ended at its ValidUntil, not before")
	assert.ErrorIs(t, context.Cause(l.Context()), relock.ErrLockLost)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := b.Lock(wctx)
	require.NoError(t, err)
	assert.Greater(t, l2.Token(), l.Token())
	require.NoError(t, l2.Unlock())
}
