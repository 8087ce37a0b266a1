package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Scenario 3: 64 goroutines, each locking and unlocking a key of its own,
// through one client of the library. Like scenarios 1 and 2, the rows run
// interleaved, a slice at a time, so that drift in the machine's speed hits
// them alike.

// distinctRounds is how many slices each row of scenario 3 is cut into.
const distinctRounds = 3

// parRow is one row of scenario 3.
type parRow struct {
	lib     *library
	lk      locker
	close   func()
	keys    []string
	samples []sampler
	ops     int64
	failed  int64
	elapsed time.Duration
	server  serverDelta
	sent    *sentCommands    // what the row's client sends
	sentRun map[string]int64 // sent's counts over the timed runs
	first   string           // the first failure
	err     error
}

func (r *runner) distinctRows(ctx context.Context) []ThroughputRow {
	var rows []*parRow
	for _, lib := range librariesIn(inDistinct) {
		rows = append(rows, r.parRow(ctx, lib))
	}
	defer func() {
		for _, p := range rows {
			if p.close != nil {
				p.close()
			}
		}
	}()
	for range distinctRounds {
		for _, p := range rows {
			if ctx.Err() != nil {
				break
			}
			p.run(ctx, r, r.plan.distinct/distinctRounds)
		}
	}
	var out []ThroughputRow
	for _, p := range rows {
		row := p.result(r.plan.distinctGoroutines)
		r.logf("distinct %-28s %8.0f ops/s  p50 %-9v p99 %-9v Redis %.1f cmds/op %s µs/op CPU %s %s", p.lib.ID, row.OpsPerSec, row.P50, row.P99, row.Server.PerOp, usecOp(row.Server), fmtPct(row.Server.CPU/row.Seconds), row.Err)
		out = append(out, row)
	}
	return out
}

// distinctRow runs lib's row alone for the plan's time, with a CPU profile
// written to profile.
func (r *runner) distinctRow(ctx context.Context, lib *library, profile string) ThroughputRow {
	p := r.parRow(ctx, lib)
	if p.close != nil {
		defer p.close()
	}
	if p.err == nil {
		stop, err := startProfile(profile)
		if err != nil {
			p.err = err
		} else {
			p.run(ctx, r, r.plan.distinct)
			stop()
		}
	}
	return p.result(r.plan.distinctGoroutines)
}

// parRow opens lib and takes each goroutine's key once, untimed.
func (r *runner) parRow(ctx context.Context, lib *library) *parRow {
	g := r.plan.distinctGoroutines
	p := &parRow{lib: lib, samples: make([]sampler, g), sent: newSentCommands()}
	p.lk, p.close, p.err = lib.open(r.addr, p.sent)
	if p.err != nil {
		return p
	}
	for i := range g {
		p.samples[i].limit = max(1, r.plan.maxSamples/g)
		key := r.key("distinct", lib.ID, fmt.Sprint(i))
		p.keys = append(p.keys, key)
		unlock, err := p.lk.Lock(ctx, key)
		if err == nil {
			err = unlock()
		}
		if err != nil {
			p.err = fmt.Errorf("warm-up: %w", err)
			return p
		}
	}
	return p
}

// run runs every goroutine for d and adds what they did to the row.
func (p *parRow) run(ctx context.Context, r *runner, d time.Duration) {
	if p.err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	before, err := readStats(ctx, r.admin)
	if err != nil {
		p.err = err
		return
	}
	sent0 := p.sent.snapshot()
	var ops, failed atomic.Int64
	var first atomic.Value
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i, key := range p.keys {
		wg.Go(func() {
			octx := opCtx(ctx) // Locks that wait as long as they take
			for range maxAcquisitions {
				t := time.Now()
				if t.After(end) || ctx.Err() != nil {
					return
				}
				unlock, err := p.lk.Lock(octx, key)
				if err == nil {
					err = unlock()
				}
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				p.samples[i].add(time.Since(t))
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	p.elapsed += time.Since(start)
	p.sentRun = addSent(p.sentRun, sentSince(sent0, p.sent.snapshot()))
	after, err := readStats(ctx, r.admin)
	if err != nil {
		p.err = err
		return
	}
	p.ops += ops.Load()
	p.failed += failed.Load()
	if e, ok := first.Load().(string); ok && p.first == "" {
		p.first = e
	}
	p.server.add(diff(before, after))
}

// result reports the row.
func (p *parRow) result(goroutines int) ThroughputRow {
	row := ThroughputRow{Lib: p.lib.Lib, Goroutines: goroutines}
	if p.err != nil {
		row.Err = p.err.Error()
		return row
	}
	var all []time.Duration
	for _, s := range p.samples {
		all = append(all, s.samples...)
	}
	l := summarize(all)
	row.Ops, row.Failed, row.Seconds = p.ops, p.failed, p.elapsed.Seconds()
	if row.Seconds > 0 {
		row.OpsPerSec = float64(row.Ops) / row.Seconds
	}
	row.P50, row.P99 = l.P50, l.P99
	row.Server = p.server.cost(row.Ops, p.sentRun)
	if p.first != "" {
		row.Err = fmt.Sprintf("%d operations failed, first: %s", row.Failed, p.first)
	}
	return row
}
