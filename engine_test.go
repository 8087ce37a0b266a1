package relock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/faultproxy"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// A release, and the subscription's confirmation, that land while a waiter
// is joining its first subscription still wake it: it takes its wake-up
// signal before it asks whether the subscription is live.
func TestFirstWaitMissesNoWakeUp(t *testing.T) {
	srv := redistest.Shared(t)
	holder := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	m := mutex.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	held, err := holder.Lock(ctx) // a 30s lease: the waiter's fallback timer is its 5s cap
	require.NoError(t, err)

	released := make(chan struct{})
	restore := relock.SetJoinedHook(func() {
		select {
		case <-released:
			return
		default:
		}
		if err := held.Unlock(); err != nil {
			t.Error(err)
		}
		close(released)
		// Let the subscription's confirmation and the release's wake-up
		// arrive while the waiter is between its two steps.
		time.Sleep(200 * time.Millisecond)
	})
	defer restore()
	start := time.Now()
	l, err := m.Lock(ctx)
	require.NoError(t, err)
	waited := time.Since(start)
	require.NoError(t, l.Unlock())
	select {
	case <-released:
	default:
		t.Fatal("the waiter never joined a subscription: the test did not test anything")
	}
	// The fallback would have been the 5s cap; a woken waiter retries at once.
	assert.Less(t, waited, 3*time.Second, "the waiter slept through the release")
}

// Lock returns soon after its ctx ends, whatever Redis does: here Redis is
// paused, so the attempt gets no reply, and its cleanup cannot reach Redis
// either.
func TestLockKeepsItsDeadlineWhenRedisHangs(t *testing.T) {
	srv := redistest.New(t)
	for _, tc := range []struct {
		kind string
		lock func(*relock.Client, string) relock.Locker
	}{
		{"mutex", func(c *relock.Client, n string) relock.Locker { return mutex.New(c, n) }},
		{"reentrant", func(c *relock.Client, n string) relock.Locker { return reentrant.New(c, n) }},
		{"fair", func(c *relock.Client, n string) relock.Locker { return fair.New(c, n) }},
		{"rwlock", func(c *relock.Client, n string) relock.Locker { return rwlock.New(c, n).Locker() }},
	} {
		for _, inAttempt := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/in attempt %v", tc.kind, inAttempt), func(t *testing.T) {
				holder := locktest.Client(t, srv.Client(t))
				c := locktest.Client(t, srv.Client(t))
				m := tc.lock(c, t.Name())
				held, err := tc.lock(holder, t.Name()).Lock(context.Background())
				require.NoError(t, err)
				_, err = m.TryLock(context.Background()) // loads the scripts
				require.ErrorIs(t, err, relock.ErrNotAcquired)
				const deadline = 300 * time.Millisecond
				if inAttempt {
					srv.Pause(t) // the attempt will get no reply
				}
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				waiting := make(chan error, 1)
				go func() {
					_, err := m.Lock(ctx)
					waiting <- err
				}()
				if !inAttempt {
					time.Sleep(deadline / 3) // let it wait, then stop Redis answering
					srv.Pause(t)
				}
				var lockErr error
				select {
				case lockErr = <-waiting:
				case <-time.After(10 * time.Second):
					srv.Resume(t)
					t.Fatal("Lock did not return 10s after its ctx ended")
				}
				took := time.Since(start)
				srv.Resume(t)
				assert.ErrorIs(t, lockErr, context.DeadlineExceeded)
				// Generous for a loaded machine; the old engine overran by a
				// whole synchronous cleanup (1s, and 2s for fair).
				assert.Less(t, took, deadline+700*time.Millisecond, "Lock overran its ctx")
				require.NoError(t, held.Unlock())
			})
		}
	}
}

// Lock heeds a ctx that is canceled, not timed out, while Redis hangs, on
// a pipelined rueidis client and on one without auto-pipelining (whose
// commands rueidis bounds by their deadline only).
func TestLockHeedsCancelWhenRedisHangs(t *testing.T) {
	srv := redistest.New(t)
	for _, tc := range clientModes {
		t.Run(tc.name, func(t *testing.T) {
			c := locktest.Client(t, benchClient(t, srv.Addr(), tc.opt))
			m := mutex.New(c, t.Name())
			l, err := m.Lock(context.Background()) // loads the scripts
			require.NoError(t, err)
			require.NoError(t, l.Unlock())
			srv.Pause(t)
			defer srv.Resume(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			locked := make(chan error, 1)
			go func() {
				_, err := m.Lock(ctx)
				locked <- err
			}()
			time.Sleep(300 * time.Millisecond)
			cancel()
			start := time.Now()
			select {
			case err := <-locked:
				assert.ErrorIs(t, err, context.Canceled)
				assert.Less(t, time.Since(start), 700*time.Millisecond, "Lock overran its ctx")
			case <-time.After(10 * time.Second):
				t.Fatal("Lock did not return 10s after its ctx was canceled")
			}
		})
	}
}

// Lock keeps its deadline while rueidis dials again a connection that
// broke, a dial another Lock started and that hangs: rueidis makes the
// later Lock wait for it whatever its ctx. Round 0 comes after an idle
// second, the later rounds at once after an answered call. (An attempt ran
// on the caller's goroutine while the connection was trusted: at first
// until a call failed, then for a second after an answer; either way the
// later Lock waited out the dial's 5s.)
func TestLockKeepsItsDeadlineWhileRedialing(t *testing.T) {
	srv := redistest.Shared(t)
	proxy, err := faultproxy.Start(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	for round := range 3 {
		// A Client per round: none remembers an earlier round's failures.
		c := locktest.Client(t, benchClient(t, proxy.Addr(), rueidis.ClientOption{}))
		m := mutex.New(c, t.Name()) // one name: one connection of rueidis's (one per key slot)
		// A ctx that can be canceled and has no deadline starts the
		// pipeline goroutines of the lock's connection: its reader sees
		// the drop, and the next call dials again at once.
		started, cancel := context.WithCancel(context.Background())
		l, err := m.Lock(started)
		cancel()
		require.NoError(t, err)
		require.NoError(t, l.Unlock())

		if round == 0 {
			time.Sleep(1500 * time.Millisecond) // idle
		}
		proxy.Blackhole() // a dial connects, and its handshake gets no answer
		proxy.DropAll()
		time.Sleep(100 * time.Millisecond) // rueidis's reader sees the drop
		dialer, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		dialed := make(chan struct{})
		go func() {
			defer close(dialed)
			m.Lock(dialer) //nolint:errcheck // only starts the dial
		}()
		time.Sleep(100 * time.Millisecond)

		const deadline = 300 * time.Millisecond
		ctx, cancel2 := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		_, err = m.Lock(ctx)
		took := time.Since(start)
		cancel2()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "round %d", round)
		assert.Less(t, took, deadline+700*time.Millisecond, "round %d: Lock overran its ctx waiting for another's dial", round)
		cancel()
		proxy.Heal()
		<-dialed
	}
}

// A closed rueidis client is final: Lock fails at once with ErrClosed
// instead of retrying until its ctx ends.
func TestLockOnClosedRedisClient(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, l := range []relock.Locker{mutex.New(c, t.Name()), fair.New(c, t.Name())} {
		_, err := l.Lock(ctx)
		assert.ErrorIs(t, err, relock.ErrClosed)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "it did not wait for ctx: %v", err)
		_, err = l.TryLock(ctx)
		assert.ErrorIs(t, err, relock.ErrClosed)
	}
}

// Nothing handed to users reaches the engine behind a lock: a Locker has
// the methods of its kind and no more.
func TestLockersExposeNoEngine(t *testing.T) {
	c := locktest.Client(t, redistest.Shared(t).Client(t))
	rw := rwlock.New(c, t.Name())
	for _, l := range []relock.Locker{mutex.New(c, t.Name()), reentrant.New(c, t.Name()), fair.New(c, t.Name()), rw.RLocker(), rw.Locker()} {
		_, redis := l.(interface{ Redis() rueidis.Client })
		_, acquire := l.(interface {
			Acquire(context.Context, bool) (*relock.Lease, error)
		})
		assert.False(t, redis || acquire, "%T exposes the engine", l)
	}
}

// acquireSpy is a rueidis client that counts the acquire attempts sent
// through it: FCALL, EVALSHA or EVAL of an acquire script, the only
// scripts called with one key and four arguments or more (packed:
// luascripts.AcquireCall; a release has two or three).
type acquireSpy struct {
	locktest.Spy
	attempts atomic.Int64 // acquire calls
	renewals atomic.Int64 // renewals (and re-entries, heartbeats): two keys
}

// newAcquireSpy returns an acquireSpy on rc.
func newAcquireSpy(rc rueidis.Client) *acquireSpy {
	s := &acquireSpy{}
	s.Spy = locktest.Spy{Client: rc, See: func(args []string) {
		if len(args) > 4 && (args[0] == "FCALL" || args[0] == "EVALSHA" || args[0] == "EVAL") {
			switch {
			case args[2] == "1" && len(args) >= 8:
				s.attempts.Add(1)
			case args[2] == "2":
				s.renewals.Add(1)
			}
		}
	}}
	return s
}

// queued waits until the queue of the lock keys holds n waiters.
func queued(t *testing.T, rc rueidis.Client, keys luascripts.Keys, n int64) {
	t.Helper()
	locktest.Eventually(t, fmt.Sprintf("%d waiters queued", n), func() bool {
		return int64(locktest.QueueLen(context.Background(), rc, keys.Queue)) == n
	})
}

// rawWaiter queues owner as a waiter of the lock keys with its waiter
// timeout waiterMs, by an attempt of script as a Lock makes it (a Lock
// that never heartbeats: a dead waiter, unless the caller attempts again),
// and returns that attempt, to repeat.
func rawWaiter(t *testing.T, rc rueidis.Client, script luascripts.Script, keys luascripts.Keys, owner, waiterMs string) luascripts.Call {
	t.Helper()
	attempt := luascripts.AcquireCall(script, keys, luascripts.Acquire{
		Owner: owner, LeaseMs: "30000", Wait: true, Queue: true, WaiterMs: waiterMs, Publish: "publish",
	})
	reply, err := attempt.Exec(context.Background(), rc).AsIntSlice()
	require.NoError(t, err)
	granted, _, ok := luascripts.AcquireReply(reply)
	require.True(t, ok && !granted, "%s queued: %v", owner, reply)
	return attempt
}

// lockAsync locks l in a goroutine, under ctx, and sends the lease (nil if
// Lock failed, which fails the test).
func lockAsync(t *testing.T, ctx context.Context, l relock.Locker) <-chan *relock.Lease {
	got := make(chan *relock.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx)
		assert.NoError(t, err)
		got <- lease
	}()
	return got
}

// A queued waiter to which a release hands the lock holds it on the
// wake-up alone, which carries the grant's token: a handoff costs the
// release and its message, not another acquire round trip. The grant
// lasts what was left of the waiter's deadline; the watchdog extends it
// to the lease when a third of that has passed, like any lease, so that a
// short hold costs no renewal. (The waiter used to take the grant up by an
// attempt of its own, and then to renew it as Lock returned.) The same for
// a fair lock's waiter and a read-write lock's waiting writer, here behind
// a reader (its grant used to be a wake-up to try).
func TestHandOverNeedsNoAttempt(t *testing.T) {
	for _, kd := range []struct {
		name string
		// holder and waiter are the lock called name on c, as the holder
		// and the waiter take it.
		holder, waiter func(c *relock.Client, name string) relock.Locker
	}{
		{"fair",
			func(c *relock.Client, name string) relock.Locker { return fair.New(c, name) },
			func(c *relock.Client, name string) relock.Locker { return fair.New(c, name) }},
		{"rwlock",
			func(c *relock.Client, name string) relock.Locker { return rwlock.New(c, name).RLocker() },
			func(c *relock.Client, name string) relock.Locker { return rwlock.New(c, name).Locker() }},
	} {
		t.Run(kd.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			holder := kd.holder(locktest.Client(t, srv.Client(t)), t.Name())
			spy := newAcquireSpy(srv.Client(t))
			waiter := kd.waiter(locktest.Client(t, spy), t.Name())
			ctx := context.Background()

			first, err := holder.Lock(ctx)
			require.NoError(t, err)
			got := lockAsync(t, ctx, waiter)
			rc := srv.Client(t)
			keys := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())
			queued(t, rc, keys, 1)
			time.Sleep(100 * time.Millisecond) // its subscription confirmed (a waiter queues after subscribing)
			before := spy.attempts.Load()
			require.Positive(t, before, "the spy counts the waiter's attempts")
			require.NoError(t, first.Unlock())
			l := <-got
			require.NotNil(t, l)
			handed, renewals := time.Now(), spy.renewals.Load()
			assert.Equal(t, before, spy.attempts.Load(), "the waiter made an acquire attempt after the hand-over")
			assert.Greater(t, l.Token(), first.Token())
			time.Sleep(200 * time.Millisecond)
			if time.Since(handed) < relock.DefaultWaiterTimeout/4 {
				assert.Equal(t, renewals, spy.renewals.Load(), "the handed lease was renewed within 200 ms")
			}
			assert.True(t, l.ValidUntil().After(time.Now().Add(relock.DefaultWaiterTimeout/2)), "valid for what is left of the grant")
			locktest.Eventually(t, "the grant extended to the lease", func() bool {
				ms, err := rc.Do(ctx, rc.B().Pttl().Key(keys.Lock).Build()).AsInt64()
				return err == nil && ms > int64(relock.DefaultWatchdogTimeout/time.Millisecond)-2000
			})
			require.NoError(t, l.Context().Err())
			require.NoError(t, l.Unlock())
		})
	}
}

// The waiter behind one to which a release hands the lock is not woken:
// it makes no attempt until the lock is handed to it in turn. (It was once
// woken to try, found the lock held, and slept until the grant's expiry:
// one attempt per handoff; then woken to be told the grant's expiry: a
// process woken per handoff.)
func TestWaiterBehindAHandOverDoesNotTry(t *testing.T) {
	srv := redistest.Shared(t)
	holder := fair.New(locktest.Client(t, srv.Client(t)), t.Name())
	first := fair.New(locktest.Client(t, srv.Client(t)), t.Name())
	spy := newAcquireSpy(srv.Client(t))
	second := fair.New(locktest.Client(t, spy), t.Name())
	ctx := context.Background()
	rc := srv.Client(t)
	keys := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())
	h, err := holder.Lock(ctx)
	require.NoError(t, err)
	firstGot := lockAsync(t, ctx, first)
	queued(t, rc, keys, 1)
	secondGot := lockAsync(t, ctx, second)
	queued(t, rc, keys, 2)
	time.Sleep(100 * time.Millisecond) // the second's attempt answered, its subscription confirmed
	before := spy.attempts.Load()
	require.Positive(t, before, "the spy counts the second waiter's attempts")

	require.NoError(t, h.Unlock())
	a := <-firstGot
	require.NotNil(t, a)
	time.Sleep(300 * time.Millisecond) // what a woken second would take to try
	assert.Equal(t, before, spy.attempts.Load(), "the second waiter tried while the lock was handed to the first")
	require.NoError(t, a.Unlock())
	b := <-secondGot
	require.NotNil(t, b)
	assert.Equal(t, before, spy.attempts.Load(), "the second waiter tried before the lock was handed to it")
	assert.Greater(t, b.Token(), a.Token())
	require.NoError(t, b.Unlock())
}

// A release that hands the lock to a waiter that has died (it never takes
// the grant up) wakes nobody else, yet the waiter behind it takes the lock
// once the grant expires, at the dead waiter's deadline (its waiter
// timeout, 1 s here): its attempts bounded its sleep by that deadline, not
// by the holder's 30 s lease or the 5 s cap on any sleep.
func TestGrantToADeadWaiterPassesOnAtItsDeadline(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	holder := fair.New(locktest.Client(t, srv.Client(t)), t.Name())
	next := fair.New(locktest.Client(t, srv.Client(t)), t.Name())
	ctx := context.Background()
	keys := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())

	h, err := holder.Lock(ctx)
	require.NoError(t, err)
	rawWaiter(t, rc, luascripts.FairAcquire, keys, "dead:1", "1000")

	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got := lockAsync(t, lctx, next)
	queued(t, rc, keys, 2)
	require.NoError(t, h.Unlock())
	released := time.Now()
	owner, err := rc.Do(ctx, rc.B().Hkeys().Key(keys.Lock).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"dead:1"}, owner, "the release handed the lock to the dead waiter")

	l := <-got
	require.NotNil(t, l)
	took := time.Since(released)
	assert.Less(t, took, 4*time.Second, "the next waiter took the lock %v after the release; the grant expired within 1 s", took)
	require.NoError(t, l.Unlock())
}

// A hand-over that leaves the waiter little of its grant — it queued
// almost a waiter timeout ago, and the grant lasts what was left of that —
// is taken up by an attempt, a full lease from then: Lock never returns a
// lease about to lapse.
func TestHandOverNearItsDeadlineIsTakenUp(t *testing.T) {
	srv := redistest.Shared(t)
	const waiterTimeout = time.Second
	holder := fair.New(locktest.Client(t, srv.Client(t)), t.Name())
	waiter := fair.New(locktest.Client(t, srv.Client(t)), t.Name(), relock.WithWaiterTimeout(waiterTimeout))
	ctx := context.Background()
	first, err := holder.Lock(ctx)
	require.NoError(t, err)
	start := time.Now()
	got := lockAsync(t, ctx, waiter)
	queued(t, srv.Client(t), luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name()), 1)
	time.Sleep(time.Until(start.Add(waiterTimeout * 9 / 10)))
	require.NoError(t, first.Unlock())
	l := <-got
	require.NotNil(t, l)
	left := time.Until(l.ValidUntil())
	assert.Greater(t, left, relock.DefaultWatchdogTimeout/3, "Lock returned a lease with %v left", left)
	time.Sleep(200 * time.Millisecond)
	assert.NoError(t, context.Cause(l.Context()), "the lease lapsed right after Lock returned it")
	require.NoError(t, l.Unlock())
}

// A waiter that takes a hand-over up by an attempt (here: a fixed lease,
// which must last its whole length from the grant) does so with waiters
// queued behind it. Only an owner's first attempt is spared the look at
// the lock that finds a hand-over; this one, a later attempt, looks,
// rather than queueing again behind the waiters and holding the grant
// until it lapses.
func TestHandOverTakenUpWithWaitersBehind(t *testing.T) {
	const lease = 20 * time.Second
	type opts = []relock.LockOption
	for _, kd := range []struct {
		name             string
		lock             func(c *relock.Client, name string, o opts) relock.Locker
		acquire, release luascripts.Script
	}{
		{"mutex", func(c *relock.Client, n string, o opts) relock.Locker { return mutex.New(c, n, o...) },
			luascripts.MutexAcquire, luascripts.MutexRelease},
		{"reentrant", func(c *relock.Client, n string, o opts) relock.Locker { return reentrant.New(c, n, o...) },
			luascripts.ReentrantAcquire, luascripts.ReentrantRelease},
		{"fair", func(c *relock.Client, n string, o opts) relock.Locker { return fair.New(c, n, o...) },
			luascripts.FairAcquire, luascripts.FairRelease},
	} {
		t.Run(kd.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			rc := srv.Client(t)
			ctx := context.Background()
			keys := luascripts.NewKeys(relock.DefaultKeyPrefix, t.Name())
			holder := kd.lock(locktest.Client(t, srv.Client(t)), t.Name(), nil)
			waiter := kd.lock(locktest.Client(t, srv.Client(t)), t.Name(), opts{relock.WithLease(lease)})

			h, err := holder.Lock(ctx)
			require.NoError(t, err)
			// A waiter first in the queue, so that the Lock's first attempt
			// queues behind it (the mutex's and reentrant lock's Lock
			// queues behind a queue before it starves), then one behind
			// that Lock.
			rawWaiter(t, rc, kd.acquire, keys, "ahead:1", "60000")
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := lockAsync(t, lctx, waiter)
			queued(t, rc, keys, 2)
			locktest.Eventually(t, "the waiter's subscription", func() bool {
				chans, err := rc.Do(ctx, rc.B().PubsubChannels().Pattern(keys.Wake+"*").Build()).AsStrSlice()
				return err == nil && len(chans) > 0
			})
			rawWaiter(t, rc, kd.acquire, keys, "behind:1", "60000")
			out := luascripts.ReleaseCall(kd.release, keys, "ahead:1", "publish", 0, "0")
			require.NoError(t, out.Exec(ctx, rc).Error(), "the first waiter withdraws")
			queued(t, rc, keys, 2)

			require.NoError(t, h.Unlock())
			l := <-got
			require.NotNil(t, l, "the hand-over was not taken up")
			assert.Greater(t, l.Token(), h.Token())
			ms, err := rc.Do(ctx, rc.B().Pttl().Key(keys.Lock).Build()).AsInt64()
			require.NoError(t, err)
			assert.Greater(t, ms, int64(lease/time.Millisecond)-5000, "the lock holds the taken-up lease, not the grant (the waiter timeout)")
			ws, err := locktest.Queue(ctx, rc, keys.Queue)
			require.NoError(t, err)
			require.Len(t, ws, 1)
			assert.Equal(t, "behind:1", ws[0].Owner, "the waiter behind stays queued, alone")
			require.NoError(t, l.Unlock())
		})
	}
}
