package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/roundtrip"
)

// Scenario 6: the cost of keeping leases alive. A child process holds many
// leases of distinct names, each renewed every second by its library (a 3s
// lease), and measures, over a window, the commands Redis processed, the
// round trips its client asked for, its own CPU (getrusage) and Redis's
// CPU. The same client with no lease held, measured first in the same
// process, is the idle baseline.

func (r *runner) watchdogRows(ctx context.Context) []WatchdogRow {
	var rows []WatchdogRow
	noted := map[string]bool{}
	for _, lib := range libraries {
		if ctx.Err() != nil {
			break
		}
		if lib.keep == nil {
			if lib.noKeep != "" && !noted[lib.Name] {
				noted[lib.Name] = true
				rows = append(rows, WatchdogRow{Lib: lib.Lib, Note: lib.noKeep})
			}
			continue
		}
		row := r.watchdogRow(ctx, lib)
		r.logf("watchdog %-28s %d/%d held, lost %d: %7.0f cmd/s %6.1f round trips/s, client CPU %5.1f%% (idle %4.1f%%), Redis CPU %5.1f%% %s",
			lib.ID, row.Acquired, row.Leases, row.Lost, row.Held.CommandsSec, row.Held.RoundTripSec, 100*row.Held.ClientCPU, 100*row.Idle.ClientCPU, 100*row.Held.RedisCPU, row.Err)
		rows = append(rows, row)
	}
	return rows
}

func (r *runner) watchdogRow(ctx context.Context, lib *library) WatchdogRow {
	p := r.plan
	row := WatchdogRow{Lib: lib.Lib, Renews: true, Leases: p.leases}
	budget := p.idle + p.settle + p.window + 3*time.Minute
	c, err := spawnChild(ctx, childSpec{
		Mode: "watchdog", Addr: r.addr, Lib: lib.ID, Prefix: r.key("keep", lib.ID),
		Leases: p.leases, Idle: p.idle, Settle: p.settle, Window: p.window, Limit: budget,
	})
	if err != nil {
		row.Err = err.Error()
		return row
	}
	defer c.kill()
	res, err := c.result(budget)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	return *res.Watchdog
}

// keepConcurrency is how many leases a watchdog child takes or releases at
// once.
const keepConcurrency = 32

// watchdogChild is the process of a watchdog row.
func watchdogChild(ctx context.Context, s childSpec) (*WatchdogRow, error) {
	lib, err := libraryByID(s.Lib)
	if err != nil {
		return nil, err
	}
	row := &WatchdogRow{Lib: lib.Lib, Renews: true, Leases: s.Leases}
	k, calls, closeK, err := lib.keep(s.Addr)
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
	if e, ok := firstErr.Load().(string); ok {
		row.Err = fmt.Sprintf("%d leases not acquired, first: %s", s.Leases-row.Acquired, e)
	}
	if err := sleepUntil(ctx, time.Now().Add(s.Settle)); err != nil {
		return nil, err
	}
	if row.Held, err = measureWindow(ctx, admin, calls, s.Window); err != nil {
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
	return row, nil
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
