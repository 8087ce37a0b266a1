package relock_test

import (
	"context"
	"strconv"
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
