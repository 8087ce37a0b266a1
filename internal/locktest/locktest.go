// Package locktest holds the helpers relock's tests share: a Client closed
// at cleanup, waiting on a condition with a generous deadline instead of a
// fixed sleep, and checks that every kind must pass.
package locktest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/faultproxy"
	"github.com/relockgo/relock/luascripts"
)

// Client returns a relock Client on rc, closed at cleanup.
func Client(t testing.TB, rc rueidis.Client, opts ...relock.Option) *relock.Client {
	t.Helper()
	c, err := relock.New(rc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Eventually polls cond until it holds, and fails the test if it does not
// within 20 seconds: long enough for a loaded CI machine, so that the test
// asserts the condition, not how fast it came.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// NewLock makes a lock of the kind under test called name on c.
type NewLock func(c *relock.Client, name string, opts ...relock.LockOption) relock.Locker

// NoStarvation checks that a waiter that loses every race still gets the
// lock: its Client reaches Redis (at addr) through a proxy that adds lag
// each way, while three holders on a Client without lag take the lock over
// and over with fixed leases that they let expire. Each expiry is then a
// race that the nearby waiters win by the lag twice over, every time: a
// waiter that newcomers may always overtake starves. rc is a client of addr.
func NoStarvation(t *testing.T, addr string, rc rueidis.Client, newLock NewLock) {
	t.Helper()
	const lag = 15 * time.Millisecond
	proxy, err := faultproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	proxy.SetLatency(lag)
	farRC, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(farRC.Close)
	near, far := Client(t, rc), Client(t, farRC)
	name := t.Name()

	ctx, stop := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		grants atomic.Int64
	)
	for range 3 {
		wg.Go(func() {
			lk := newLock(near, name, relock.WithLease(200*time.Millisecond))
			for ctx.Err() == nil {
				lease, err := lk.Lock(ctx)
				if err != nil {
					continue
				}
				grants.Add(1)
				select { // never unlocked: the lease expires
				case <-lease.Context().Done():
				case <-ctx.Done():
					lease.Unlock()
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	Eventually(t, "the nearby holders' first grant", func() bool { return grants.Load() > 0 })

	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := grants.Load()
	lease, err := newLock(far, name).Lock(wctx)
	if err != nil {
		t.Fatalf("the lagging waiter starved: %v; the nearby holders took the lock %d times meanwhile", err, grants.Load()-before)
	}
	t.Logf("the lagging waiter got the lock after %d grants to the nearby holders", grants.Load()-before)
	if err := lease.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// EveryWaiterServed checks that on a hot lock every waiter gets its share:
// two Clients on rc and rc2 with eight goroutines each lock, hold 1 ms,
// unlock and lock again until they have taken the lock 320 times between
// them (20 each if shared equally); every goroutine must have had at least
// 5. A waiter that sleeps while a few others cycle — the lock passing
// between releasers that lock again at once, and never into the
// starvation queue — fails it.
func EveryWaiterServed(t *testing.T, rc, rc2 rueidis.Client, newLock NewLock) {
	t.Helper()
	const perClient, total = 8, 320
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg     sync.WaitGroup
		taken  atomic.Int64
		shares [2 * perClient]atomic.Int64
	)
	for ci, r := range []rueidis.Client{rc, rc2} {
		c := Client(t, r)
		for g := range perClient {
			wg.Go(func() {
				lk := newLock(c, t.Name())
				for taken.Load() < total && ctx.Err() == nil {
					lease, err := lk.Lock(ctx)
					if err != nil {
						return
					}
					taken.Add(1)
					shares[ci*perClient+g].Add(1)
					time.Sleep(time.Millisecond) // the work under the lock
					if err := lease.Unlock(); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	got := make([]int64, len(shares))
	for i := range shares {
		got[i] = shares[i].Load()
	}
	t.Logf("acquisitions per goroutine: %v", got)
	for i, n := range got {
		if n < int64(total/(4*len(got))) {
			t.Errorf("goroutine %d got the lock %d times of %d: %v", i, n, taken.Load(), got)
		}
	}
}

// Queue returns the waiters queued in key, a lock's queue
// (luascripts.Keys.Queue), in arrival order.
func Queue(ctx context.Context, rc rueidis.Client, key string) ([]luascripts.QueuedWaiter, error) {
	members, err := rc.Do(ctx, rc.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, err
	}
	return luascripts.ParseQueue(members), nil
}

// QueueLen returns how many waiters are queued in key, a lock's queue, or
// -1 when Redis fails.
func QueueLen(ctx context.Context, rc rueidis.Client, key string) int {
	ws, err := Queue(ctx, rc, key)
	if err != nil {
		return -1
	}
	return len(ws)
}
