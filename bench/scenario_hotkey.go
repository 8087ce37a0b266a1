package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Scenarios 4 and 5: one hot key, its waiters split across processes. Each
// process runs one client of the library and its share of the waiters; a
// waiter locks, holds for the row's hold time, unlocks and locks again
// until the scenario's time ends. A Lock that gives up (by design for some
// libraries) counts as a failure and the waiter calls Lock again at once.
//
// Acquisition times are taken after Lock returns and before Unlock is
// called, on the wall clock the processes share. Exclusive holds cannot
// overlap, so sorting them gives the order the lock was granted in, from
// which holder switches are counted.

// hotKeyRows runs every library at every hold.
func (r *runner) hotKeyRows(ctx context.Context) []HotKeyRow {
	var rows []HotKeyRow
	for _, hold := range r.plan.holds {
		for _, lib := range librariesIn(inHotKey) {
			if ctx.Err() != nil {
				return rows
			}
			row := r.hotKeyRow(ctx, lib, hold, "")
			r.logf("hot key  %-28s hold %-4v %8.0f handoffs/s  wait p99 %-9v jain %.2f  failures %d %s", lib.ID, hold, row.HandoffsSec, row.WaitP99.Round(time.Microsecond), row.Jain, row.Failures, row.Err)
			rows = append(rows, row)
		}
	}
	return rows
}

// hotKeyRow runs one library at one hold. With profile set, the first
// process writes a CPU profile there.
func (r *runner) hotKeyRow(ctx context.Context, lib *library, hold time.Duration, profile string) HotKeyRow {
	p := r.plan
	row := HotKeyRow{Lib: lib.Lib, Hold: hold, Processes: p.hotKeyProcs, Workers: p.hotKeyProcs * p.hotKeyWorkers, Seconds: p.hotKey.Seconds()}
	key := r.key("hot", lib.ID, hold.String())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // kills the children if this returns early

	children := make([]*child, p.hotKeyProcs)
	defer func() {
		for _, c := range children {
			if c != nil {
				c.kill() // a no-op for those that reported and exited
			}
		}
	}()
	for i := range children {
		spec := childSpec{
			Mode: "hotkey", Addr: r.addr, Lib: lib.ID, Key: key,
			Workers: p.hotKeyWorkers, FirstID: i * p.hotKeyWorkers, Hold: hold,
			MaxSamples: p.maxSamples, Limit: p.hotKey + 2*time.Minute,
		}
		if i == 0 {
			spec.Profile = profile
		}
		c, err := spawnChild(ctx, spec)
		if err != nil {
			row.Err = err.Error()
			return row
		}
		children[i] = c
	}
	for _, c := range children {
		if err := c.awaitReady(time.Minute); err != nil {
			row.Err = err.Error()
			return row
		}
	}
	before, err := readStats(ctx, r.admin)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	from := time.Now().Add(50 * time.Millisecond)
	to := from.Add(p.hotKey)
	for _, c := range children {
		if err := c.start(from, to); err != nil {
			row.Err = err.Error()
			return row
		}
	}
	parts := make([]*hotKeyPart, len(children))
	var errs []error
	for i, c := range children {
		res, err := c.result(p.hotKey + time.Minute)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts[i] = res.HotKey
	}
	after, err := readStats(ctx, r.admin)
	if err := errors.Join(append(errs, err)...); err != nil {
		row.Err = err.Error()
		return row
	}
	mergeHotKey(&row, parts, lib.overlaps)
	row.Server = costSince(before, after, row.Acquisitions)
	return row
}

// mergeHotKey fills row's figures from the processes' parts.
func mergeHotKey(row *HotKeyRow, parts []*hotKeyPart, overlaps bool) {
	var waits []time.Duration
	type grant struct {
		at     int64
		worker int32
	}
	var grants []grant
	capped := false
	for _, part := range parts {
		row.PerWorker = append(row.PerWorker, part.PerWorker...)
		row.Failures += part.Failures
		row.Unfinished += part.Open
		row.Errors += part.Errors
		if row.FirstError == "" {
			row.FirstError = part.FirstError
		}
		waits = append(waits, part.Waits...)
		for i, at := range part.Stamps {
			grants = append(grants, grant{at, part.Workers[i]})
		}
		capped = capped || part.Capped
	}
	for _, n := range row.PerWorker {
		row.Acquisitions += n
	}
	row.HandoffsSec = float64(row.Acquisitions) / row.Seconds
	w := summarize(waits)
	row.WaitP50, row.WaitP99, row.WaitMax = w.P50, w.P99, w.Max
	row.Jain = jain(row.PerWorker)
	row.SwitchesSec = -1
	row.Overlapping = overlaps
	if !overlaps && !capped {
		slices.SortFunc(grants, func(a, b grant) int { return cmpInt64(a.at, b.at) })
		switches := 0
		for i := 1; i < len(grants); i++ {
			if grants[i].worker != grants[i-1].worker {
				switches++
			}
		}
		row.SwitchesSec = float64(switches) / row.Seconds
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hotKeyPart is what one process of a hot-key row measured.
type hotKeyPart struct {
	PerWorker  []int64         `json:"per_worker"`
	Failures   int64           `json:"failures"`
	Open       int64           `json:"open"` // waiters still waiting at the end
	Errors     int64           `json:"errors"`
	FirstError string          `json:"first_error,omitempty"`
	Waits      []time.Duration `json:"waits"`
	Stamps     []int64         `json:"stamps"`  // Unix ns of each acquisition
	Workers    []int32         `json:"workers"` // the worker of each stamp
	Capped     bool            `json:"capped"`  // a worker hit its sample limit: stamps are incomplete
}

// hotKeyChild is a process of a hot-key row: it opens the library, says
// ready, waits for its start line, runs its waiters and returns their part.
func hotKeyChild(ctx context.Context, s childSpec, stdin io.Reader, stdout io.Writer) (*hotKeyPart, error) {
	lib, err := libraryByID(s.Lib)
	if err != nil {
		return nil, err
	}
	lk, closeLib, err := lib.open(s.Addr)
	if err != nil {
		return nil, err
	}
	defer closeLib()
	// Load the library's scripts and connections before the clock starts.
	warm := fmt.Sprintf("%s:warm:%d", s.Key, s.FirstID)
	unlock, err := lk.Lock(ctx, warm)
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := unlock(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return nil, err
	}
	from, to, err := readStart(bufio.NewReader(stdin))
	if err != nil {
		return nil, err
	}
	stopProfile, err := startProfile(s.Profile)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	if err := sleepUntil(ctx, from); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, to)
	defer cancel()

	limit := max(1, s.MaxSamples/s.Workers)
	stats := make([]waiterStats, s.Workers)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Go(func() { stats[i] = hotKeyWaiter(ctx, lk, s.Key, s.Hold, limit) })
	}
	wg.Wait()
	stopProfile()

	part := &hotKeyPart{}
	for i, st := range stats {
		part.PerWorker = append(part.PerWorker, st.acquired)
		part.Failures += st.failures
		part.Open += st.open
		part.Errors += st.errors
		if part.FirstError == "" && st.firstError != nil {
			part.FirstError = st.firstError.Error()
		}
		part.Waits = append(part.Waits, st.waits.samples...)
		part.Stamps = append(part.Stamps, st.stamps...)
		for range st.stamps {
			part.Workers = append(part.Workers, int32(s.FirstID+i))
		}
		part.Capped = part.Capped || int64(len(st.stamps)) < st.acquired
	}
	return part, nil
}

// waiterStats is what one waiter of a hot-key row saw.
type waiterStats struct {
	acquired, failures, errors int64
	open                       int64 // waits still open at the end (0 or 1)
	firstError                 error
	waits                      sampler
	stamps                     []int64
}

// maxAcquisitions bounds one waiter's loop, whatever the time.
const maxAcquisitions = 10_000_000

// hotKeyWaiter locks key, holds it for hold and unlocks it, until ctx ends.
// Its wait runs from its first Lock call to the one that succeeds; a wait
// still open when ctx ends counts with its length so far, so that a waiter
// stuck for the whole row is not left out.
func hotKeyWaiter(ctx context.Context, lk locker, key string, hold time.Duration, limit int) waiterStats {
	st := waiterStats{waits: sampler{limit: limit}}
	note := func(err error) {
		st.errors++
		if st.firstError == nil {
			st.firstError = err
		}
	}
	for ctx.Err() == nil && st.acquired < maxAcquisitions {
		began := time.Now()
		var unlock func() error
		for unlock == nil {
			u, err := lk.Lock(ctx, key)
			switch {
			case err == nil:
				unlock = u
			case ctx.Err() != nil:
				st.waits.add(time.Since(began))
				st.open++
				return st
			case notAcquired(err):
				st.failures++
			default:
				note(err)
			}
		}
		got := time.Now()
		st.acquired++
		st.waits.add(got.Sub(began))
		if len(st.stamps) < limit {
			st.stamps = append(st.stamps, got.UnixNano())
		}
		if hold > 0 {
			time.Sleep(hold) // the holder's work
		}
		if err := unlock(); err != nil {
			note(fmt.Errorf("unlock: %w", err))
		}
	}
	return st
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
