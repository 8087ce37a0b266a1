package relock_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/internal/redistest"
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
// holds n other leases (issue 14: the watchdog at scale), and reports how
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
