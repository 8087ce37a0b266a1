package relock_test

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// BenchmarkLockUnlockDistinct runs Lock+Unlock of distinct keys from 64
// goroutines on one Client, with a Lock ctx that can end (as a caller's
// deadline does): compare commits with
//
//	go test -run '^$' -bench LockUnlockDistinct -benchmem -count 6 .
func BenchmarkLockUnlockDistinct(b *testing.B) {
	srv := redistest.Shared(b)
	c := locktest.Client(b, srv.Client(b))
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := mutex.New(c, b.Name()+"/"+strconv.FormatInt(next.Add(1), 10))
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			l, err := m.Lock(ctx)
			if err != nil {
				cancel()
				b.Error(err)
				return
			}
			if err := l.Unlock(); err != nil {
				b.Error(err)
			}
			cancel()
		}
	})
}

// BenchmarkLockUnlockHeld runs Lock+Unlock of one key on a Client that
// holds n other leases (the watchdog at scale), and reports how
// long taking the n leases took ("take-s", 64 goroutines) and the heap
// each held lease costs ("heap-B/lease"):
//
//	go test -run '^$' -bench LockUnlockHeld -benchmem .
func BenchmarkLockUnlockHeld(b *testing.B) {
	for _, n := range []int{0, 1_000, 10_000, 100_000} {
		b.Run("held="+strconv.Itoa(n), func(b *testing.B) {
			srv := redistest.New(b)
			c := locktest.Client(b, srv.Client(b))
			ctx := context.Background()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			var taken atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				wg.Go(func() {
					for i := g; i < n; i += 64 {
						if _, err := mutex.New(c, "held/"+strconv.Itoa(i)).Lock(ctx); err != nil {
							b.Error(err)
							return
						}
						taken.Add(1)
					}
				})
			}
			wg.Wait()
			took := time.Since(start)
			runtime.GC()
			runtime.ReadMemStats(&after)
			m := mutex.New(c, "hot")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(took.Seconds(), "take-s")
			if n > 0 {
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-B/lease")
			}
		})
	}
}

// BenchmarkLockUnlock runs Lock+Unlock of one key by one goroutine, with a
// Lock ctx that has a deadline (as a caller's usually has), beside the
// mutex's two scripts alone on the same kind of client ("scripts"): the
// engine's own cost is the difference. Besides allocs/op it reports
// goroutine runs per operation ("runs/op": scheduling events from
// runtime/metrics, the process's background goroutines included), which
// counts goroutine wake-ups:
//
//	go test -run '^$' -bench 'LockUnlock$' -benchmem .
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Shared(b)
	for _, tc := range clientModes {
		b.Run(tc.name+"/mutex", func(b *testing.B) {
			c := locktest.Client(b, benchClient(b, srv.Addr(), tc.opt))
			m := mutex.New(c, b.Name())
			lockUnlockLoop(b, func(ctx context.Context) error { return lockUnlock(ctx, m) })
		})
		b.Run(tc.name+"/scripts", func(b *testing.B) {
			rc := benchClient(b, srv.Addr(), tc.opt)
			keys := luascripts.NewKeys(relock.DefaultKeyPrefix, b.Name())
			acquire := luascripts.AcquireCall(luascripts.MutexAcquire, keys, luascripts.Acquire{
				Owner: "bench", LeaseMs: "15000", Wait: true, WaiterMs: "15000", Publish: "publish",
			})
			release := luascripts.ReleaseCall(luascripts.MutexRelease, keys, "bench", "publish", 0, "0")
			lockUnlockLoop(b, func(ctx context.Context) error {
				if err := acquire.Exec(ctx, rc).Error(); err != nil {
					return err
				}
				return release.Exec(ctx, rc).Error()
			})
		})
	}
}

// BenchmarkNoPipeliningFloor times, interleaved in one process so that
// the machine's drift hits every row alike, what the bench's
// DisableAutoPipelining target compares: one PING through a default
// (pipelined) rueidis client, and on a client with DisableAutoPipelining
// two PINGs, two EVALSHA of a script that only returns (the floor of any
// Lock+Unlock made of two scripts), the mutex's two scripts alone, and a
// mutex Lock+Unlock under a ctx that never ends (as the bench program's
// rows). It reports each row's p50 ÷ the pipelined PING's p50 ("×ping"):
//
//	go test -run '^$' -bench NoPipeliningFloor -benchtime 3000x -count 3 .
func BenchmarkNoPipeliningFloor(b *testing.B) {
	srv := redistest.Shared(b)
	pipelined := benchClient(b, srv.Addr(), rueidis.ClientOption{})
	rc := benchClient(b, srv.Addr(), rueidis.ClientOption{DisableAutoPipelining: true})
	c := locktest.Client(b, benchClient(b, srv.Addr(), rueidis.ClientOption{DisableAutoPipelining: true}))
	m := mutex.New(c, b.Name())
	keys := luascripts.NewKeys(relock.DefaultKeyPrefix, b.Name()+"/scripts")
	acquire := luascripts.AcquireCall(luascripts.MutexAcquire, keys, luascripts.Acquire{
		Owner: "bench", LeaseMs: "15000", Wait: true, WaiterMs: "15000", Publish: "publish",
	})
	release := luascripts.ReleaseCall(luascripts.MutexRelease, keys, "bench", "publish", 0, "0")
	returnOnly := rueidis.NewLuaScript("return 1")
	ctx := context.Background()
	// Through the pipeline goroutines, as a Client's renewals start them.
	pingCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	two := func(f func() error) func() error {
		return func() error {
			if err := f(); err != nil {
				return err
			}
			return f()
		}
	}
	rows := []struct {
		name string
		op   func() error
	}{
		{"pipelined-ping", func() error { return pipelined.Do(pingCtx, pipelined.B().Ping().Build()).Error() }},
		{"two-pings", two(func() error { return rc.Do(ctx, rc.B().Ping().Build()).Error() })},
		{"floor", two(func() error { return returnOnly.Exec(ctx, rc, nil, nil).Error() })},
		{"scripts", func() error {
			if err := acquire.Exec(ctx, rc).Error(); err != nil {
				return err
			}
			return release.Exec(ctx, rc).Error()
		}},
		{"mutex", func() error { return lockUnlock(ctx, m) }},
	}
	took := make([][]time.Duration, len(rows))
	for range 100 { // warm: scripts loaded, connections dialed
		for _, r := range rows {
			if err := r.op(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		for i, r := range rows {
			start := time.Now()
			if err := r.op(); err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	ping := median(took[0])
	for i, r := range rows[1:] {
		b.ReportMetric(float64(median(took[i+1]))/float64(ping), r.name+"-×ping")
	}
	b.ReportMetric(float64(ping.Microseconds()), "ping-p50-µs")
}

// median returns the p50 of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// lockUnlockLoop times op, each call under a ctx with a deadline, and
// reports runs/op (see BenchmarkLockUnlock).
func lockUnlockLoop(b *testing.B, op func(context.Context) error) {
	for range 100 { // warm: scripts loaded, connections dialed
		if err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	before := goroutineRuns()
	b.ResetTimer()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := op(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(goroutineRuns()-before)/float64(b.N), "runs/op")
}

// goroutineRuns counts the times goroutines have been scheduled to run so
// far, as the scheduler latency histogram samples them: one run in 8, so
// compare runs/op between rows, not with a count.
func goroutineRuns() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n
}

// clientModes are the two ways a rueidis client sends a lone caller's
// commands that the engine's tests and benchmarks compare: through its
// pipeline goroutines (the default), or on the caller's goroutine over a
// pooled connection (DisableAutoPipelining).
var clientModes = []struct {
	name string
	opt  rueidis.ClientOption
}{{"pipelined", rueidis.ClientOption{}}, {"DisableAutoPipelining", rueidis.ClientOption{DisableAutoPipelining: true}}}

// benchClient returns a rueidis client of addr with opt, closed at the
// end of b.
func benchClient(b testing.TB, addr string, opt rueidis.ClientOption) rueidis.Client {
	opt.InitAddress, opt.DisableCache = []string{addr}, true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)
	if !opt.DisableAutoPipelining {
		// A command under a ctx that can be canceled but has no deadline
		// starts the connection's pipeline goroutines, as a Client's
		// renewals do: from then on every command goes through them.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	return rc
}

// allocBounds bounds the allocations of an uncontended Lock+Unlock, per
// kind of ctx given to Lock: reused is a lock made once, perCall one made
// for the call (mutex.New(c, "invoice:"+id).Lock(ctx)), the lock's own
// allocations included; the bench's target is at most 25. Under a ctx that can
// end, which the test makes per call as a caller does (its own 4
// allocations counted), the attempt runs in a goroutine the caller can
// leave (see waiter.attempt), which costs 2 more (the goroutine, and the
// ctx's Done channel); under context.Background it runs on the caller's.
// The counts are the whole process's: on the container backend they
// measured one more per call once in a while, so each bound keeps one
// allocation of slack over what redis-server processes measure (15 and 19
// under context.Background, 21 and 26 under a deadline).
var allocBounds = []struct {
	name            string
	ctx             func() (context.Context, context.CancelFunc)
	reused, perCall float64
}{
	{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, 16, 20},
	{"deadline", func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}, 22, 27},
}

// TestLockUnlockAllocs fails when an uncontended Lock+Unlock allocates more
// than allocBounds allow, on a pipelined rueidis client and on one with
// DisableAutoPipelining (BenchmarkLockUnlock measures the same).
func TestLockUnlockAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; .ci/run runs this test without it")
	}
	srv := redistest.Shared(t)
	for _, tc := range clientModes {
		t.Run(tc.name, func(t *testing.T) {
			c := locktest.Client(t, benchClient(t, srv.Addr(), tc.opt))
			name := t.Name()
			m := mutex.New(c, name)
			for _, bound := range allocBounds {
				t.Run(bound.name, func(t *testing.T) {
					perCall := leastAllocs(t, func() error {
						ctx, cancel := bound.ctx()
						defer cancel()
						// Not through lockUnlock: a Mutex put in an interface
						// allocates, and the lock's own allocations are measured.
						l, err := mutex.New(c, name).Lock(ctx)
						if err != nil {
							return err
						}
						return l.Unlock()
					})
					reused := leastAllocs(t, func() error {
						ctx, cancel := bound.ctx()
						defer cancel()
						return lockUnlock(ctx, m)
					})
					t.Logf("allocations per Lock+Unlock: %.1f, of a lock made for it %.1f", reused, perCall)
					if reused > bound.reused {
						t.Errorf("Lock+Unlock allocates %.1f times, want at most %.0f", reused, bound.reused)
					}
					if perCall > bound.perCall {
						t.Errorf("Lock+Unlock of a lock made per call allocates %.1f times, want at most %.0f", perCall, bound.perCall)
					}
				})
			}
		})
	}
}

// leastAllocs returns the least allocations per call of op over a few
// testing.AllocsPerRun runs: it counts the whole process's allocations,
// other tests' leftover goroutines included. It fails t if op fails.
func leastAllocs(t *testing.T, op func() error) float64 {
	var failed error
	allocs := math.Inf(1)
	for range 5 {
		allocs = min(allocs, testing.AllocsPerRun(200, func() {
			if err := op(); err != nil && failed == nil {
				failed = err
			}
		}))
	}
	if failed != nil {
		t.Fatal(failed)
	}
	return allocs
}

// lockUnlock takes l under ctx and unlocks it.
func lockUnlock(ctx context.Context, l relock.Locker) error {
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	return lease.Unlock()
}
