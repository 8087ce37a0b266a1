package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/roundtrip"
)

// Scenario 6: the cost of keeping leases alive. A child process holds many
// leases of distinct names, each renewed by its library, and measures,
// over a window, the commands Redis processed, the round trips its client
// asked for, its own CPU (getrusage) and Redis's CPU. The same client with
// no lease held, measured first in the same process, is the idle baseline.
//
// The comparison runs every library that renews on its own at the same
// lease, watchdogTimeout (3 s, renewed every second), so that their
// renewal costs compare. relock also runs at scale, alone: 1,000, 10,000
// and 100,000 leases at its default lease, relock.DefaultWatchdogTimeout
// (30 s, renewed every 10 s), which is what target 6 is about;
// at the comparison's lease, 100,000 leases would be 100,000 renewals a
// second, which saturates a small machine's Redis and says nothing of
// relock's own scaling. Its child also times how long taking the leases
// took (keepConcurrency goroutines), the heap they hold (HeapAlloc after a
// GC, before and after taking them), and Lock+Unlock of one more key, one
// goroutine, before taking the leases and again while holding them, as the
// root package's BenchmarkLockUnlockHeld does.

// renewEvery is how often relock and rueidislock renew a lease of lease
// here: relock every third of its lease (WithWatchdogTimeout's contract),
// rueidislock at the ExtendInterval it is given, a third of its
// KeyValidity.
func renewEvery(lease time.Duration) time.Duration { return lease / 3 }

// keepShape is one watchdog row's setup.
type keepShape struct {
	leases int
	lease  time.Duration // of every lease held
	window time.Duration // measured while holding them
	// loop and heldLoop are how long Lock+Unlock is timed before taking
	// the leases and while holding them; 0: not timed.
	loop, heldLoop time.Duration
}

// watchdogRows runs the comparison, every library at the plan's leases and
// watchdogTimeout, and relock at each of its scaleLeases at its default
// lease, into scale.
func (r *runner) watchdogRows(ctx context.Context) (rows, scale []WatchdogRow) {
	p := r.plan
	noted := map[string]bool{}
	for _, lib := range libraries {
		if ctx.Err() != nil {
			return rows, scale
		}
		if lib.keep == nil {
			if lib.noKeep != "" && !noted[lib.Name] {
				noted[lib.Name] = true
				rows = append(rows, WatchdogRow{Lib: lib.Lib, Note: lib.noKeep})
			}
			continue
		}
		rows = append(rows, r.watchdogRow(ctx, lib, keepShape{leases: p.leases, lease: watchdogTimeout, window: p.window}))
	}
	lib, err := libraryByID("relock")
	if err != nil {
		return rows, scale
	}
	for _, n := range p.scaleLeases {
		if ctx.Err() != nil {
			break
		}
		scale = append(scale, r.watchdogRow(ctx, lib, keepShape{leases: n, lease: relock.DefaultWatchdogTimeout, window: p.scaleWindow, loop: p.lockLoop, heldLoop: p.heldLoop}))
	}
	return rows, scale
}

// watchdogRow runs lib's child in shape.
func (r *runner) watchdogRow(ctx context.Context, lib *library, shape keepShape) WatchdogRow {
	p := r.plan
	row := WatchdogRow{Lib: lib.Lib, Renews: true, Leases: shape.leases, Lease: shape.lease, RenewEvery: renewEvery(shape.lease)}
	budget := p.idle + p.settle + shape.window + shape.loop + shape.heldLoop + 3*time.Minute
	c, err := spawnChild(ctx, childSpec{
		Mode: "watchdog", Addr: r.addr, Lib: lib.ID, Prefix: r.key("keep", lib.ID, fmt.Sprint(shape.leases), shape.lease.String()),
		Leases: shape.leases, Lease: shape.lease, Idle: p.idle, Settle: p.settle, Window: shape.window, Loop: shape.loop, HeldLoop: shape.heldLoop, Limit: budget,
	})
	if err != nil {
		row.Err = err.Error()
	} else {
		defer c.kill()
		res, err := c.result(budget)
		if err != nil {
			row.Err = err.Error()
		} else {
			row = *res.Watchdog
		}
	}
	r.logf("watchdog %-28s %d/%d held (lease %v, renewed every %v) in %.2fs, lost %d: %7.0f cmd/s %6.1f round trips/s, client CPU %5.1f%% (idle %4.1f%%), Redis CPU %5.1f%%, %.0f B/lease, Lock+Unlock %.0f/s (none held %.0f/s: %.0f before, %.0f after) %s",
		lib.ID, row.Acquired, row.Leases, row.Lease, row.RenewEvery, row.AcquireSec, row.Lost, row.Held.CommandsSec, row.Held.RoundTripSec, 100*row.Held.ClientCPU, 100*row.Idle.ClientCPU, 100*row.Held.RedisCPU,
		row.HeapPerLease, row.LockUnlockHeld, row.NoneHeld(), row.LockUnlockIdle, row.LockUnlockAfter, row.Err)
	return row
}

// keepConcurrency is how many leases a watchdog child takes or releases at
// once: 64 goroutines, as BenchmarkLockUnlockHeld takes its leases.
const keepConcurrency = 64

// watchdogChild is the process of a watchdog row.
func watchdogChild(ctx context.Context, s childSpec) (*WatchdogRow, error) {
	lib, err := libraryByID(s.Lib)
	if err != nil {
		return nil, err
	}
	if s.Lease <= 0 {
		return nil, fmt.Errorf("lease %v: must be positive", s.Lease)
	}
	row := &WatchdogRow{Lib: lib.Lib, Renews: true, Leases: s.Leases, Lease: s.Lease, RenewEvery: renewEvery(s.Lease)}
	k, calls, closeK, err := lib.keep(s.Addr, s.Lease)
	if err != nil {
		return nil, err
	}
	defer closeK()
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, s.Limit)
	defer cancel()

	// Load scripts and connections first.
	if _, release, err := k.Hold(ctx, s.Prefix+":warm"); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	} else if err := release(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if row.Idle, err = measureWindow(ctx, admin, calls, s.Idle); err != nil {
		return nil, err
	}
	hot := s.Prefix + ":hot"
	if row.LockUnlockIdle, err = lockLoop(ctx, k, hot, s.Loop); err != nil {
		return nil, err
	}

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	lost := make([]<-chan struct{}, s.Leases)
	releases := make([]func() error, s.Leases)
	var firstErr atomic.Value
	start := time.Now()
	parallel(s.Leases, func(i int) {
		l, release, err := k.Hold(ctx, fmt.Sprintf("%s:%d", s.Prefix, i))
		if err != nil {
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		lost[i], releases[i] = l, release
	})
	row.AcquireSec = time.Since(start).Seconds()
	for _, rel := range releases {
		if rel != nil {
			row.Acquired++
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if row.Acquired > 0 {
		row.HeapPerLease = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(row.Acquired)
	}
	if e, ok := firstErr.Load().(string); ok {
		row.Err = fmt.Sprintf("%d leases not acquired, first: %s", s.Leases-row.Acquired, e)
	}
	if err := sleepUntil(ctx, time.Now().Add(s.Settle)); err != nil {
		return nil, err
	}
	if row.Held, err = measureWindow(ctx, admin, calls, s.Window); err != nil {
		return nil, err
	}
	if row.LockUnlockHeld, err = lockLoop(ctx, k, hot, s.HeldLoop); err != nil {
		return nil, err
	}
	for _, l := range lost {
		if l == nil {
			continue
		}
		select {
		case <-l:
			row.Lost++
		default:
		}
	}
	parallel(s.Leases, func(i int) {
		if releases[i] != nil {
			_ = releases[i]()
		}
	})
	if row.LockUnlockAfter, err = lockLoop(ctx, k, hot, s.Loop); err != nil {
		return nil, err
	}
	return row, nil
}

// lockLoop locks and unlocks key through k, one goroutine, for d, and
// returns the operations per second; nothing for d = 0.
func lockLoop(ctx context.Context, k keeper, key string, d time.Duration) (float64, error) {
	if d <= 0 {
		return 0, nil
	}
	n := 0
	start := time.Now()
	end := start.Add(d)
	for time.Now().Before(end) {
		unlock, err := k.Lock(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("Lock+Unlock: %w", err)
		}
		if err := unlock(); err != nil {
			return 0, fmt.Errorf("Lock+Unlock: unlock: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// measureWindow measures d of this process and the server.
func measureWindow(ctx context.Context, admin rueidis.Client, calls *roundtrip.Counter, d time.Duration) (WindowStats, error) {
	s0, err := readStats(ctx, admin)
	if err != nil {
		return WindowStats{}, err
	}
	cpu0, n0, t0 := cpuTime(), calls.Count(), time.Now()
	if err := sleepUntil(ctx, t0.Add(d)); err != nil {
		return WindowStats{}, err
	}
	cpu1, n1, t1 := cpuTime(), calls.Count(), time.Now()
	s1, err := readStats(ctx, admin)
	if err != nil {
		return WindowStats{}, err
	}
	sec := t1.Sub(t0).Seconds()
	return WindowStats{
		Seconds:      sec,
		CommandsSec:  float64(s1.commands-s0.commands-1) / sec,
		RoundTripSec: float64(n1-n0) / sec,
		ClientCPU:    (cpu1 - cpu0).Seconds() / sec,
		RedisCPU:     (s1.cpu - s0.cpu) / sec,
		Commands:     diff(s0, s1).calls,
	}, nil
}

// parallel calls f(0) … f(n-1) from keepConcurrency goroutines.
func parallel(n int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range keepConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
