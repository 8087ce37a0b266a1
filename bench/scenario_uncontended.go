package main

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Scenario 2: uncontended Lock+Unlock, one goroutine, one key reused. Each
// operation is timed; allocations are runtime.MemStats deltas (Mallocs,
// TotalAlloc) over the timed loops divided by their operations, so they
// count the whole process: the library's background goroutines included,
// the benchmark's own loop excluded (its sample buffer is allocated
// before). Goroutine runs are counted the same way, from the runtime's
// scheduling-latency histogram (see schedRuns): the wake-ups of the
// library's goroutines and of its client's reader and writer included.
//
// Scenarios 1 and 2 run interleaved: every row runs a slice of its time in
// turn, round after round. The cost of a round trip drifts (on a virtual
// machine, with whether the host keeps idle cores polling), and
// interleaving lets every row see the same drift, so that their ratios hold.

// rounds is how many slices each row of scenarios 1 and 2 is cut into.
const rounds = 6

// seqRow is one row of scenarios 1 and 2: one goroutine doing one
// operation again and again.
type seqRow struct {
	name  string
	op    func(ctx context.Context) error
	close func() // nil: nothing to close
	busy  bool   // a goroutine spins on one core while the row runs

	samples              []time.Duration // capped at its capacity
	mallocs, bytes, runs uint64
	server               serverDelta
	sent                 *sentCommands    // what the row's client sends; nil for the floor rows
	sentRun              map[string]int64 // sent's counts over the timed loops
	err                  error
}

// sequentialRows runs scenarios 1 and 2 interleaved.
func (r *runner) sequentialRows(ctx context.Context) ([]FloorRow, []LatencyRow) {
	floors := r.floorRows()
	libs := librariesIn(inUncontended)
	locks := make([]*seqRow, len(libs))
	for i, lib := range libs {
		locks[i] = r.lockRow(lib)
	}
	all := append(append([]*seqRow{}, floors...), locks...)
	defer func() {
		for _, s := range all {
			if s.close != nil {
				s.close()
			}
		}
	}()
	perRow := r.plan.maxSamples
	for _, s := range all {
		if s.err == nil {
			s.samples = make([]time.Duration, 0, perRow)
			s.warm(ctx, 200)
		}
	}
	slice := r.plan.uncontended / rounds
	for range rounds {
		for _, s := range all {
			if ctx.Err() != nil {
				break
			}
			if !s.busy {
				s.run(ctx, r, slice)
			}
		}
	}
	// The diagnostic row last and alone: a busy core leaves the machine
	// faster for a while after it, which would favour the next row.
	for _, s := range all {
		if s.busy {
			s.run(ctx, r, r.plan.uncontended/2)
		}
	}

	var fr []FloorRow
	for _, s := range floors {
		row := floorRow(s)
		r.logf("floor    %-28s PING p50 %-9v p99 %-9v %s", row.Client, row.P50, row.P99, row.Err)
		fr = append(fr, row)
	}
	var lr []LatencyRow
	for i, s := range locks {
		row := latencyRow(libs[i], s)
		r.logf("alone    %-28s p50 %-9v p99 %-9v %5.0f allocs/op %6.0f B/op %5.1f runs/op  Redis %.1f cmds/op %s µs/op %s", libs[i].ID, row.P50, row.P99, row.Allocs, row.Bytes, row.Runs, row.Server.PerOp, usecOp(row.Server), row.Err)
		lr = append(lr, row)
	}
	return fr, lr
}

// lockRow returns lib's row of scenario 2, not yet run.
func (r *runner) lockRow(lib *library) *seqRow {
	s := &seqRow{name: lib.ID, sent: newSentCommands()}
	lk, closeLib, err := lib.open(r.addr, s.sent)
	if err != nil {
		s.err = err
		return s
	}
	key := r.key("one", lib.ID)
	s.close = closeLib
	s.op = func(ctx context.Context) error {
		unlock, err := lk.Lock(ctx, key)
		if err != nil {
			return err
		}
		if err := unlock(); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}
	return s
}

// uncontendedRow runs lib's row of scenario 2 alone for the plan's time,
// with a CPU profile written to profile.
func (r *runner) uncontendedRow(ctx context.Context, lib *library, profile string) LatencyRow {
	s := r.lockRow(lib)
	if s.close != nil {
		defer s.close()
	}
	if s.err == nil {
		s.samples = make([]time.Duration, 0, r.plan.maxSamples)
		s.warm(ctx, 200)
	}
	if s.err == nil {
		stop, err := startProfile(profile)
		if err != nil {
			s.err = err
		} else {
			s.run(ctx, r, r.plan.uncontended)
			stop()
		}
	}
	return latencyRow(lib, s)
}

// latencyRow reports a row of scenario 2.
func latencyRow(lib *library, s *seqRow) LatencyRow {
	row := LatencyRow{Lib: lib.Lib}
	if s.err != nil {
		row.Err = s.err.Error()
		return row
	}
	n := len(s.samples)
	l := summarize(s.samples)
	row.N, row.P50, row.P99, row.Mean = n, l.P50, l.P99, l.Mean
	if n > 0 {
		row.Allocs = float64(s.mallocs) / float64(n)
		row.Bytes = float64(s.bytes) / float64(n)
		row.Runs = float64(s.runs) / float64(n)
	}
	row.Server = s.server.cost(int64(n), s.sentRun)
	return row
}

// warm runs the operation n times, untimed.
func (s *seqRow) warm(ctx context.Context, n int) {
	for range n {
		if s.err = s.op(ctx); s.err != nil {
			return
		}
	}
}

// run runs the operation for d, or until the samples are full, and adds
// what it measured to the row.
func (s *seqRow) run(ctx context.Context, r *runner, d time.Duration) {
	if s.err != nil || len(s.samples) == cap(s.samples) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	if s.busy {
		stop := make(chan struct{})
		defer close(stop)
		go spin(stop)
	}
	before, err := readStats(ctx, r.admin)
	if err != nil {
		s.err = err
		return
	}
	sent0 := s.sent.snapshot()
	sched := newSchedRuns()
	sched.read() // allocates its histogram before the loop
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	runs0 := sched.read()
	end := time.Now().Add(d)
	// Locks that wait as long as they take: the run is bounded by time.
	octx := opCtx(ctx)
	for len(s.samples) < cap(s.samples) {
		t := time.Now()
		if t.After(end) {
			break
		}
		if err := s.op(octx); err != nil {
			s.err = err
			break
		}
		s.samples = append(s.samples, time.Since(t))
	}
	runs1 := sched.read()
	runtime.ReadMemStats(&m1)
	sent1 := s.sent.snapshot()
	after, err := readStats(ctx, r.admin)
	if err != nil {
		s.err = err
		return
	}
	s.mallocs += m1.Mallocs - m0.Mallocs
	s.bytes += m1.TotalAlloc - m0.TotalAlloc
	s.runs += runs1 - runs0
	s.server.add(diff(before, after))
	if s.sent != nil {
		s.sentRun = addSent(s.sentRun, sentSince(sent0, sent1))
	}
}

// spin keeps one core busy until stop is closed.
func spin(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
	}
}

// opCtx is the ctx a row's Lock calls get: ctx's values without its end,
// as a caller that waits as long as it takes passes context.Background.
// Every library gets the same; relock's "deadline per Lock" row shows what
// a ctx that can end costs it (see relockDeadline).
func opCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
