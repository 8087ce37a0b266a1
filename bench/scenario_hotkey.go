package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
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
// which holder switches are counted; with the time each wait began, they
// also give the grants that overtook an earlier waiter (see overtakes).
//
// The same rows, in other shapes: 32 waiters in 16 processes of 2, and
// 64 processes of one waiter (the pod shape) against as many waiters in 2
// processes (a release must wake one process per handoff, not one per
// process with a waiter), and 1 to 1,000 waiters in up to 4 processes (a
// release must wake O(1) waiters).

// hotShape is how a hot-key row spreads its waiters, and how long it runs.
type hotShape struct {
	procs, waiters int
	d              time.Duration
	tag            string // in the lock's name: tells apart rows of one shape
}

// name returns the parts of a row's key name in shape s: parts, the
// shape, and its tag if it has one.
func (s hotShape) name(parts ...string) []string {
	parts = append(parts, fmt.Sprintf("%dx%d", s.procs, s.waiters))
	if s.tag != "" {
		parts = append(parts, s.tag)
	}
	return parts
}

// workers returns how many waiters process i runs: the waiters split as
// evenly as they go, the first processes taking one more.
func (s hotShape) workers(i int) int {
	n := s.waiters / s.procs
	if i < s.waiters%s.procs {
		n++
	}
	return n
}

// firstID returns the global number of process i's first waiter.
func (s hotShape) firstID(i int) int {
	id := 0
	for j := range i {
		id += s.workers(j)
	}
	return id
}

// hotKeyRows runs every library at every hold, in the main shape.
func (r *runner) hotKeyRows(ctx context.Context) []HotKeyRow {
	p := r.plan
	shape := p.mainShape()
	var rows []HotKeyRow
	for _, hold := range p.holds {
		for _, lib := range librariesIn(inHotKey) {
			if ctx.Err() != nil {
				return rows
			}
			row := r.hotKeyRow(ctx, lib, hold, shape, "")
			r.logRow("hot key", row)
			rows = append(rows, row)
		}
	}
	return rows
}

// spreadRows runs the libraries of the spread set at zero hold, with the
// main shape's waiters in many processes of few waiters each.
func (r *runner) spreadRows(ctx context.Context) []HotKeyRow {
	return r.shapeRows(ctx, "spread", inSpread, r.plan.spreadShape())
}

// podRows runs the libraries of the spread set at zero hold in the pod
// shape, each process with one waiter, and before it, in the same run,
// the same waiters in two processes, which it is compared with.
func (r *runner) podRows(ctx context.Context) []HotKeyRow {
	base, pods := r.plan.podShapes()
	return r.shapeRows(ctx, "pods", inSpread, base, pods)
}

// shapeRows runs each library of set at zero hold in each of shapes in
// turn, and logs each row as what.
func (r *runner) shapeRows(ctx context.Context, what string, set scenarios, shapes ...hotShape) []HotKeyRow {
	var rows []HotKeyRow
	for _, lib := range librariesIn(set) {
		for _, shape := range shapes {
			if ctx.Err() != nil {
				return rows
			}
			row := r.hotKeyRow(ctx, lib, 0, shape, "")
			r.logRow(what, row)
			rows = append(rows, row)
		}
	}
	return rows
}

// waitersRows runs the libraries of the waiters set at zero hold with each
// of the plan's numbers of waiters, in up to waitersProcs processes.
func (r *runner) waitersRows(ctx context.Context) []HotKeyRow {
	p := r.plan
	var rows []HotKeyRow
	for _, lib := range librariesIn(inWaiters) {
		for _, n := range p.waiters {
			if ctx.Err() != nil {
				return rows
			}
			row := r.hotKeyRow(ctx, lib, 0, hotShape{procs: min(waitersProcs, n), waiters: n, d: p.waitersRow}, "")
			r.logRow("waiters", row)
			rows = append(rows, row)
		}
	}
	return rows
}

// waitersProcs is how many processes the waiters-at-scale rows spread
// their waiters over.
const waitersProcs = 4

func (r *runner) logRow(what string, row HotKeyRow) {
	woken := ""
	if w, ok := row.WokenPerHandoff(); ok {
		woken = fmt.Sprintf("  %5.2f woken/handoff (%d named + %d broadcast)", w, row.WakeUps.Named, row.WakeUps.Broadcast)
	}
	local := "–"
	if row.InProcess != nil {
		local = fmt.Sprintf("%.0f%%", 100**row.InProcess)
	}
	r.logf("%-8s %-28s %2d procs %4d waiters hold %-4v %8.0f handoffs/s  wait p99 %-9v jain %.2f  %5.1f cmd/handoff %5.2f evalsha/handoff%s  in-process %s  client CPU/handoff %v  fifo %d  failures %d %s",
		what, row.ID, row.Processes, row.Workers, row.Hold, row.HandoffsSec, row.WaitP99.Round(time.Microsecond), row.Jain,
		row.Server.PerOp, row.Server.ScriptsOp, woken, local, row.cpuPerHandoff().Round(time.Microsecond), row.FIFOViolations, row.Failures, row.Err)
}

// hotKeyRow runs one library at one hold in one shape. With profile set,
// the first process writes a CPU profile there.
func (r *runner) hotKeyRow(ctx context.Context, lib *library, hold time.Duration, shape hotShape, profile string) HotKeyRow {
	p := r.plan
	row := HotKeyRow{Lib: lib.Lib, Hold: hold, Processes: shape.procs, Workers: shape.waiters, Seconds: shape.d.Seconds()}
	key := r.key(shape.name("hot", lib.ID, hold.String())...)
	specs := make([]childSpec, shape.procs)
	for i := range specs {
		specs[i] = childSpec{
			Mode: "hotkey", Addr: r.addr, Lib: lib.ID, Key: key,
			Workers: shape.workers(i), FirstID: shape.firstID(i), Hold: hold,
			MaxSamples: p.maxSamples, Limit: shape.d + 2*time.Minute,
		}
	}
	specs[0].Profile = profile
	var before, after serverStats
	results, err := runChildren(ctx, specs, shape.d, func() (err error) {
		before, err = readStats(ctx, r.admin)
		return err
	})
	if err == nil {
		after, err = readStats(ctx, r.admin)
	}
	if err != nil {
		row.Err = err.Error()
		return row
	}
	parts := make([]*hotKeyPart, len(results))
	for i, res := range results {
		parts[i] = res.HotKey
	}
	var sent map[string]int64
	var wakeUps WakeCount
	for _, part := range parts {
		sent = addSent(sent, part.Sent)
		wakeUps = wakeUps.plus(part.Received)
	}
	mergeHotKey(&row, parts, lib.overlaps, lib.ordered)
	row.Server = diff(before, after).cost(row.Acquisitions, sent)
	if lib.Relock {
		row.WakeUps = &wakeUps
	}
	return row
}

// mergeHotKey fills row's figures from the processes' parts; ordered
// counts FIFO violations although holds overlap, in the order of the
// grants' tokens: with several grants in flight, Lock calls return in
// another order than the lock granted them.
func mergeHotKey(row *HotKeyRow, parts []*hotKeyPart, overlaps, ordered bool) {
	var waits []time.Duration
	type grant struct {
		at     int64
		worker int32
		proc   int // the part's index: the process
	}
	var grants []grant
	var spans []waitSpan
	capped, unpaired := false, false // stamps incomplete; stamps without the time their wait began
	for proc, part := range parts {
		row.ClientCPU += part.CPU
		row.PerWorker = append(row.PerWorker, part.PerWorker...)
		row.Failures += part.Failures
		row.Unfinished += part.Open
		row.Errors += part.Errors
		row.Reads += part.Reads
		row.Writes += part.Writes
		if row.FirstError == "" {
			row.FirstError = part.FirstError
		}
		waits = append(waits, part.Waits...)
		byToken := ordered && len(part.Tokens) == len(part.Stamps)
		for i, at := range part.Stamps {
			grants = append(grants, grant{at, part.Workers[i], proc})
			if i < len(part.Began) && part.Began[i] != unknownArrival {
				span := waitSpan{began: part.Began[i], granted: at}
				if byToken {
					span.granted = part.Tokens[i]
				}
				spans = append(spans, span)
			}
		}
		for _, began := range part.OpenBegan {
			if began == unknownArrival {
				continue
			}
			spans = append(spans, waitSpan{began: began, granted: math.MaxInt64})
		}
		capped = capped || part.Capped
		unpaired = unpaired || len(part.Began) != len(part.Stamps) || (ordered && len(part.Tokens) != len(part.Stamps))
	}
	for _, n := range row.PerWorker {
		row.Acquisitions += n
	}
	row.HandoffsSec = float64(row.Acquisitions) / row.Seconds
	row.ReadsSec = float64(row.Reads) / row.Seconds
	row.WritesSec = float64(row.Writes) / row.Seconds
	w := summarize(waits)
	row.WaitP50, row.WaitP99, row.WaitMax = w.P50, w.P99, w.Max
	row.Jain = jain(row.PerWorker)
	row.SwitchesSec = -1
	row.FIFOViolations = -1
	row.Overlapping = overlaps
	if !overlaps && !capped {
		slices.SortFunc(grants, func(a, b grant) int { return cmpInt64(a.at, b.at) })
		switches, local := 0, 0
		for i := 1; i < len(grants); i++ {
			if grants[i].worker != grants[i-1].worker {
				switches++
				if grants[i].proc == grants[i-1].proc {
					local++
				}
			}
		}
		row.SwitchesSec = float64(switches) / row.Seconds
		if switches > 0 && len(parts) > 1 {
			share := float64(local) / float64(switches)
			row.InProcess = &share
		}
	}
	if (!overlaps || ordered) && !capped && !unpaired {
		row.FIFOViolations = overtakes(spans, fifoTolerance)
	}
}

// unknownArrival stands for the arrival of a wait of a tokenLocker none of
// whose attempts was answered (a hand-over to an attempt whose reply was
// lost, a wait that never reached Redis): the FIFO count leaves it out.
const unknownArrival = math.MaxInt64

// fifoTolerance is how much earlier a waiter's Lock call must have begun
// for a grant to another to count as overtaking it: the slack for the
// clocks of the processes (one machine's, read at different moments) and
// for a library's attempt granularity.
const fifoTolerance = 5 * time.Millisecond

// waitSpan is one wait of one waiter: began is the Unix ns of its first
// Lock call; granted orders the grants — the Unix ns of the acquisition,
// or the grant's token for an ordered row — and is math.MaxInt64 for a
// wait still open at the end of the row.
type waitSpan struct{ began, granted int64 }

// overtakes counts the grants that overtook a waiter: those made while
// another waiter, whose Lock call had begun at least tol before the
// granted waiter's, was still waiting (granted later, or never). Under a
// FIFO lock it is zero. Each grant counts once, however many it overtook.
func overtakes(spans []waitSpan, tol time.Duration) int64 {
	// From the latest grant back: minBegan is the earliest beginning among
	// the waits granted strictly after the grant at hand (or never).
	slices.SortFunc(spans, func(a, b waitSpan) int { return cmpInt64(b.granted, a.granted) })
	minBegan := int64(math.MaxInt64)
	var n int64
	for i := 0; i < len(spans); {
		j := i
		for j < len(spans) && spans[j].granted == spans[i].granted {
			j++
		}
		for _, s := range spans[i:j] {
			if s.granted != math.MaxInt64 && minBegan <= s.began-int64(tol) {
				n++
			}
		}
		for _, s := range spans[i:j] {
			minBegan = min(minBegan, s.began)
		}
		i = j
	}
	return n
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
	PerWorker  []int64          `json:"per_worker"`
	Failures   int64            `json:"failures"`
	Open       int64            `json:"open"` // waiters still waiting at the end
	Errors     int64            `json:"errors"`
	FirstError string           `json:"first_error,omitempty"`
	Waits      []time.Duration  `json:"waits"`
	Stamps     []int64          `json:"stamps"`     // Unix ns of each acquisition
	Began      []int64          `json:"began"`      // Unix ns of the first Lock call of each stamp's wait (of a tokenLocker: when its first attempt ran, server clock)
	Workers    []int32          `json:"workers"`    // the worker of each stamp
	Tokens     []int64          `json:"tokens"`     // the fencing token of each stamp's grant, of a tokenLocker
	OpenBegan  []int64          `json:"open_began"` // Unix ns of the first Lock call of each wait open at the end (as Began)
	Capped     bool             `json:"capped"`     // a worker hit its sample limit: stamps are incomplete
	Reads      int64            `json:"reads,omitempty"`
	Writes     int64            `json:"writes,omitempty"` // of a read-write lock: reads + writes = acquisitions
	Sent       map[string]int64 `json:"sent"`             // commands the process's client sent, by name
	Received   WakeCount        `json:"received"`         // what the subscriptions of the process's client received (relock's)
	CPU        time.Duration    `json:"cpu_ns"`           // the process's CPU time (user + system) from the row's start to its waiters' end
}

// hotKeyChild is a process of a hot-key row: it opens the library, says
// ready, waits for its start line, runs its waiters and returns their part.
func hotKeyChild(ctx context.Context, s childSpec, stdin io.Reader, stdout io.Writer) (*hotKeyPart, error) {
	lib, err := libraryByID(s.Lib)
	if err != nil {
		return nil, err
	}
	sent := newSentCommands()
	open := lib.open
	if lib.openHot != nil {
		open = lib.openHot
	}
	lk, closeLib, err := open(s.Addr, sent)
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
	sent0, received0 := sent.snapshot(), sent.wakeUps()
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
	cpu0 := cpuTime()
	ctx, cancel := context.WithDeadline(ctx, to)
	defer cancel()

	limit := max(1, s.MaxSamples/s.Workers)
	stats := make([]waiterStats, s.Workers)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Go(func() { stats[i] = hotKeyWaiter(ctx, lk, s.Key, s.Hold, limit) })
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	stopProfile()
	part := collectPart(stats, s.FirstID)
	part.CPU = cpu
	part.Sent = sentSince(sent0, sent.snapshot())
	part.Received = sent.wakeUps().minus(received0)
	return part, nil
}

// collectPart gathers the waiters' stats into a process's part; the first
// waiter's global number is firstID.
func collectPart(stats []waiterStats, firstID int) *hotKeyPart {
	part := &hotKeyPart{}
	for i, st := range stats {
		part.PerWorker = append(part.PerWorker, st.acquired)
		part.Failures += st.failures
		part.Open += st.open
		part.Errors += st.errors
		part.Reads += st.reads
		part.Writes += st.writes
		if part.FirstError == "" && st.firstError != nil {
			part.FirstError = st.firstError.Error()
		}
		part.Waits = append(part.Waits, st.waits.samples...)
		part.Stamps = append(part.Stamps, st.stamps...)
		part.Began = append(part.Began, st.began...)
		part.Tokens = append(part.Tokens, st.tokens...)
		for range st.stamps {
			part.Workers = append(part.Workers, int32(firstID+i))
		}
		if st.open > 0 {
			part.OpenBegan = append(part.OpenBegan, st.openBegan)
		}
		part.Capped = part.Capped || int64(len(st.stamps)) < st.acquired
	}
	return part
}

// waiterStats is what one waiter of a hot-key row saw.
type waiterStats struct {
	acquired, failures, errors int64
	reads, writes              int64 // of a modeLocker's acquisitions
	open                       int64 // waits still open at the end (0 or 1)
	openBegan                  int64 // Unix ns the open wait began
	firstError                 error
	waits                      sampler
	stamps, began              []int64 // Unix ns of each acquisition and of its wait's first Lock call (of a tokenLocker: when its first attempt ran, server clock)
	tokens                     []int64 // the fencing token of each acquisition, of a tokenLocker
}

// maxAcquisitions bounds one waiter's loop, whatever the time.
const maxAcquisitions = 10_000_000

// hotKeyWaiter locks key, holds it for hold and unlocks it, until ctx ends.
// Its wait runs from its first Lock call to the one that succeeds; a wait
// still open when ctx ends counts with its length so far, so that a waiter
// stuck for the whole row is not left out. Of a modeLocker it counts the
// read and the write acquisitions.
func hotKeyWaiter(ctx context.Context, lk locker, key string, hold time.Duration, limit int) waiterStats {
	st := waiterStats{waits: sampler{limit: limit}}
	note := func(err error) {
		st.errors++
		if st.firstError == nil {
			st.firstError = err
		}
	}
	var token int64          // of the last grant, of a tokenLocker
	var arrival atomic.Int64 // of a tokenLocker: when the wait reached the lock (withArrival)
	lock := func(ctx context.Context) (func() error, bool, error) {
		u, err := lk.Lock(ctx, key)
		return u, false, err
	}
	ml, mixed := lk.(modeLocker)
	tl, tokens := lk.(tokenLocker)
	switch {
	case mixed:
		tokens = false
		lock = func(ctx context.Context) (func() error, bool, error) { return ml.LockMode(ctx, key) }
	case tokens:
		lock = func(ctx context.Context) (u func() error, _ bool, err error) {
			u, token, err = tl.LockToken(withArrival(ctx, &arrival), key)
			return u, false, err
		}
	}
	// arrived is when the wait that began at began reached the lock, as
	// the FIFO count takes it: for a tokenLocker, when its first attempt
	// ran, on the server's clock (withArrival), or unknownArrival when
	// none of its attempts was answered.
	arrived := func(began time.Time) int64 {
		switch at := arrival.Load(); {
		case !tokens:
			return began.UnixNano()
		case at == 0:
			return unknownArrival
		default:
			return at
		}
	}
	for ctx.Err() == nil && st.acquired < maxAcquisitions {
		arrival.Store(0)
		began := time.Now()
		var unlock func() error
		var read bool
		for unlock == nil {
			u, r, err := lock(ctx)
			switch {
			case err == nil:
				unlock, read = u, r
			case ctx.Err() != nil:
				st.waits.add(time.Since(began))
				st.open++
				st.openBegan = arrived(began)
				return st
			case notAcquired(err):
				st.failures++
			default:
				note(err)
			}
		}
		got := time.Now()
		st.acquired++
		switch {
		case mixed && read:
			st.reads++
		case mixed:
			st.writes++
		}
		st.waits.add(got.Sub(began))
		if len(st.stamps) < limit {
			st.stamps = append(st.stamps, got.UnixNano())
			st.began = append(st.began, arrived(began))
			if tokens {
				st.tokens = append(st.tokens, token)
			}
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
