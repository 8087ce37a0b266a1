package fair_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func keys(name string) (lock, queue string) {
	base := "relock:{" + name + "}"
	return base, base + ":queue"
}

// llen returns how many waiters the queue key holds.
func llen(t *testing.T, rc rueidis.Client, key string) int64 {
	t.Helper()
	ws, err := locktest.Queue(context.Background(), rc, key)
	require.NoError(t, err)
	return int64(len(ws))
}

func TestGrantsInArrivalOrder(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	_, queue := keys(name)
	m := fair.New(c, name)
	holder, err := m.Lock(context.Background())
	require.NoError(t, err)

	const n = 10
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := m.Lock(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(time.Millisecond) // give the next waiter a chance to overtake, if it could
			if err := lease.Unlock(); err != nil {
				t.Error(err)
			}
		}()
		// Start the next waiter only once this one is queued.
		locktest.Eventually(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool { return llen(t, rc, queue) == int64(i+1) })
	}
	require.NoError(t, holder.Unlock())
	wg.Wait()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, order, "grants follow the queue")
}

func TestTryLockNeverJumpsTheQueueAndDeadWaitersArePurged(t *testing.T) {
	rc := redistest.Shared(t).Client(t)
	c := locktest.Client(t, rc)
	name := t.Name()
	lock, queue := keys(name)
	ctx := context.Background()

	// A waiter that died while first in the queue: its deadline is near.
	now, err := rc.Do(ctx, rc.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	us, _ := strconv.ParseInt(now[1], 10, 64)
	deadline := sec*1000 + us/1000 + 500
	record := "ghost " + strconv.FormatInt(deadline, 10) + " 0 " + luascripts.GrantHash
	require.NoError(t, rc.Do(ctx, rc.B().Zadd().Key(queue).ScoreMember().ScoreMember(1, "ghost").ScoreMember(1, record).Build()).Error())

	m := fair.New(c, name)
	_, err = m.TryLock(ctx)
	assert.ErrorIs(t, err, relock.ErrNotAcquired, "the lock is free, but the ghost is first")
	n, err := rc.Do(ctx, rc.B().Exists().Key(lock).Build()).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)

	// A live waiter behind the ghost gets the lock once the ghost is purged.
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lease, err := m.Lock(lctx)
	require.NoError(t, err, "the dead waiter is purged after its deadline")
	assert.Equal(t, int64(0), llen(t, rc, queue))
	require.NoError(t, lease.Unlock())

	lease, err = m.TryLock(ctx)
	require.NoError(t, err, "with nobody queued, TryLock acquires")
	require.NoError(t, lease.Unlock())
}

func TestLiveWaitersKeepTheirPlace(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	const timeout = 150 * time.Millisecond
	c := locktest.Client(t, rc)
	name := t.Name()
	_, queue := keys(name)
	m := fair.New(c, name, relock.WithWaiterTimeout(timeout))
	holder, err := m.Lock(context.Background())
	require.NoError(t, err)

	first := make(chan *relock.Lease, 1)
	go func() {
		lease, err := m.Lock(context.Background())
		if err != nil {
			t.Error(err)
		}
		first <- lease
	}()
	locktest.Eventually(t, "the waiter to queue", func() bool { return llen(t, rc, queue) == 1 })
	// Many waiter timeouts pass; heartbeats keep the waiter queued.
	time.Sleep(10 * timeout)
	assert.Equal(t, int64(1), llen(t, rc, queue), "a live waiter is never purged")

	// A waiter that arrives now is behind it.
	other := fair.New(locktest.Client(t, srv.Client(t)), name, relock.WithWaiterTimeout(timeout))
	second := make(chan error, 1)
	go func() {
		lease, err := other.Lock(context.Background())
		if err == nil {
			err = lease.Unlock()
		}
		second <- err
	}()
	locktest.Eventually(t, "the second waiter to queue", func() bool { return llen(t, rc, queue) == 2 })
	require.NoError(t, holder.Unlock())
	l := <-first
	require.NotNil(t, l, "the first waiter acquires first")
	select {
	case err := <-second:
		t.Fatalf("the second waiter acquired before the first released: %v", err)
	default:
	}
	require.NoError(t, l.Unlock())
	require.NoError(t, <-second)
}

func TestCanceledWaitersLeaveNoTrace(t *testing.T) {
	srv := redistest.Shared(t)
	rc := srv.Client(t)
	name := t.Name()
	lock, queue := keys(name)
	clients := []*relock.Client{locktest.Client(t, srv.Client(t)), locktest.Client(t, srv.Client(t))}
	holder, err := fair.New(clients[0], name).Lock(context.Background())
	require.NoError(t, err)

	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if rand.IntN(2) == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(400))*time.Millisecond)
				defer cancel()
			}
			lease, err := fair.New(clients[i%2], name).Lock(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			if err := lease.Unlock(); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, holder.Unlock())
	wg.Wait()
	for _, key := range []string{lock, queue} {
		n, err := rc.Do(context.Background(), rc.B().Exists().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "%s is gone", key)
	}
}

func TestReentryAndHoldCount(t *testing.T) {
	c := locktest.Client(t, redistest.Shared(t).Client(t))
	m := fair.New(c, t.Name())
	outer, err := m.Lock(context.Background())
	require.NoError(t, err)
	inner, err := m.Lock(outer.Context())
	require.NoError(t, err)
	assert.Equal(t, outer.Token(), inner.Token())
	n, err := m.HoldCount(inner.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, inner.Unlock())
	require.NoError(t, outer.Unlock())
	n, err = m.HoldCount(outer.Context())
	require.NoError(t, err)
	assert.Equal(t, 0, n)
}
