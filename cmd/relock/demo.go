package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/redlock"
)

// probeTimeout bounds the ErrWouldDeadlock probe: a Lock under the lease's
// Context is not bounded by the demo's timeout, and it should fail at once.
const probeTimeout = 2 * time.Second

// redlockMasters is how many embedded masters the redlock demo runs, and
// killedMaster the one it kills mid-run (0-based): not the first, whose
// Client tracks the leases, so that the demo shows the plain case.
const (
	redlockMasters = 5
	killedMaster   = 2
)

// demoConfig is the demo's command line.
type demoConfig struct {
	kind     string        // "mutex", "redlock" or "semaphore"
	permits  int           // the semaphore's size
	redis    string        // host:port of a Redis server; empty: embedded miniredis
	workers  int           // goroutines contending on the mutex
	rounds   int           // acquisitions per worker
	hold     time.Duration // how long a worker holds the mutex each round
	name     string        // the mutex's name
	watchdog time.Duration // the Client's watchdog lease
	timeout  time.Duration // bounds the whole demo
}

const demoHelp = `Usage: relock demo [flags]

Runs workers that contend on one relock mutex, printing each acquisition and
release, and checks mutual exclusion and fencing tokens. Without --redis it
runs on an embedded Redis (miniredis). Exits 1 on any violation or error.

With --kind redlock the lock is a redlock over five embedded Redis masters
(miniredis), and the demo kills one of them once half the acquisitions are
done: the lock keeps working on the four left, a majority.

With --kind semaphore the workers share a semaphore of --permits permits,
each holding one per round: as many hold at once as there are permits,
never more, and the others queue in arrival order. The demo checks that
and that each grant's token is greater than those of the grants before it.
`

// demoCommand returns the demo's command line.
func demoCommand(stdout, stderr io.Writer) (*command, *demoConfig) {
	cfg := &demoConfig{}
	c := newCommand("demo", demoHelp, stdout, stderr)
	fs := c.fs
	fs.StringVar(&cfg.kind, "kind", "mutex", "the lock: mutex (package mutex), redlock (package redlock, over five embedded masters, one of them killed mid-run), or semaphore (package semaphore, of --permits permits, one per worker)")
	fs.IntVar(&cfg.permits, "permits", 2, "the semaphore's size, with --kind semaphore: how many workers hold it at once")
	fs.StringVar(&cfg.redis, "redis", "", "`host:port` of a real Redis server, standalone or cluster (default: an embedded miniredis)")
	fs.IntVar(&cfg.workers, "workers", 4, "number of workers contending on the mutex")
	fs.IntVar(&cfg.rounds, "rounds", 3, "times each worker locks the mutex")
	fs.DurationVar(&cfg.hold, "hold", 50*time.Millisecond, "how long a worker holds the mutex each round; it rests half that between rounds")
	fs.StringVar(&cfg.name, "name", "demo", "name of the mutex")
	fs.DurationVar(&cfg.watchdog, "watchdog", relock.DefaultWatchdogTimeout, "lease of the mutex, renewed by the watchdog every third of it while held")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "give up when the demo has not finished after this long")
	return c, cfg
}

func (cfg *demoConfig) validate() error {
	switch {
	case cfg.kind != "mutex" && cfg.kind != "redlock" && cfg.kind != kindSemaphore:
		return fmt.Errorf("--kind %q: want mutex, redlock or semaphore", cfg.kind)
	case cfg.permits < 1:
		return fmt.Errorf("--permits %d: must be at least 1", cfg.permits)
	case cfg.kind == "redlock" && cfg.redis != "":
		return errors.New("--redis: the redlock demo runs on five embedded masters of its own, so that it can kill one")
	case cfg.workers < 1:
		return fmt.Errorf("--workers %d: must be at least 1", cfg.workers)
	case cfg.rounds < 1:
		return fmt.Errorf("--rounds %d: must be at least 1", cfg.rounds)
	case cfg.hold < 0:
		return fmt.Errorf("--hold %v: must not be negative", cfg.hold)
	case cfg.name == "":
		return errors.New("--name: must not be empty")
	case cfg.watchdog < relock.MinLease:
		return fmt.Errorf("--watchdog %v: must be at least %v", cfg.watchdog, relock.MinLease)
	case cfg.timeout <= 0:
		return fmt.Errorf("--timeout %v: must be positive", cfg.timeout)
	}
	return nil
}

// runDemo runs the demo subcommand and returns its exit status. Its workers
// have ended, and the relock Client, the rueidis client and the embedded
// server are closed, when it returns.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, cfg := demoCommand(stdout, stderr)
	if _, code := cmd.parse(args, 0, 0); code != proceed {
		return code
	}
	if err := cfg.validate(); err != nil {
		return cmd.usageError("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	// The Clients log what they cannot return: renewal retries, lost
	// subscriptions. Show them; they explain a failure.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := &demo{
		cfg:  *cfg,
		out:  stdout,
		held: make(chan struct{}),
		gate: make(chan struct{}),
	}
	if cfg.kind == "redlock" {
		closeAll, err := d.openRedlock(logger)
		defer closeAll()
		if err != nil {
			fmt.Fprintf(stderr, "relock demo: %v\n", err)
			return exitFail
		}
	} else {
		closeAll, err := d.openMutex(logger)
		defer closeAll()
		if err != nil {
			fmt.Fprintf(stderr, "relock demo: %v\n", err)
			return exitFail
		}
	}
	what := fmt.Sprintf("%s %q", cfg.kind, cfg.name)
	if d.sem != nil {
		what += fmt.Sprintf(" of %s", plural(int64(cfg.permits), "permit"))
	}
	fmt.Fprintf(stdout, "relock demo: %s, %d workers × %d rounds, holding it %v per round and resting %v between rounds\n",
		what, cfg.workers, cfg.rounds, cfg.hold, cfg.hold/2)
	fmt.Fprintf(stdout, "redis: %s; lease %v, renewed by the watchdog every %v while held\n\n",
		d.where, cfg.watchdog, cfg.watchdog/3)

	d.run(ctx, stderr)
	d.summary()
	if d.violations > 0 || d.errors > 0 {
		fmt.Fprintf(stderr, "relock demo: FAILED: %d violation(s), %d error(s)\n", d.violations, d.errors)
		return exitFail
	}
	return exitOK
}

// openMutex sets d up with a mutex (or the semaphore of --kind semaphore)
// on the Redis of d.cfg, embedded unless --redis names one, and returns
// what closes it all, even on error.
func (d *demo) openMutex(logger *slog.Logger) (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	addr := d.cfg.redis
	d.where = "Redis at " + addr
	if addr == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return closeAll, fmt.Errorf("start the embedded Redis: %w", err)
		}
		closers = append(closers, mr.Close)
		addr, d.where = mr.Addr(), "embedded miniredis at "+mr.Addr()
	}
	rc, err := newRedis(addr, d.cfg.redis == "")
	if err != nil {
		return closeAll, fmt.Errorf("connect to %s: %w", addr, err)
	}
	closers = append(closers, rc.Close)
	c, err := relock.New(rc, relock.WithWatchdogTimeout(d.cfg.watchdog), relock.WithLogger(logger))
	if err != nil {
		return closeAll, err
	}
	closers = append(closers, func() { c.Close() })
	d.m = mutex.New(c, d.cfg.name)
	if d.cfg.kind == kindSemaphore {
		d.openSemaphore(c)
	}
	return closeAll, nil
}

// openRedlock sets d up with a redlock over five embedded masters, one of
// which d kills mid-run, and returns what closes it all, even on error.
// The killed master's Client logs nothing: its failures are the point.
func (d *demo) openRedlock(logger *slog.Logger) (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var nodes []*relock.Client
	var addrs []string
	for i := range redlockMasters {
		mr, err := miniredis.Run()
		if err != nil {
			return closeAll, fmt.Errorf("start embedded master %d: %w", i+1, err)
		}
		closers = append(closers, mr.Close) // idempotent: the killed one too
		rc, err := newRedis(mr.Addr(), true)
		if err != nil {
			return closeAll, fmt.Errorf("connect to embedded master %d at %s: %w", i+1, mr.Addr(), err)
		}
		closers = append(closers, rc.Close)
		log := logger
		if i == killedMaster {
			log = slog.New(slog.DiscardHandler)
			d.kill = mr.Close
			d.killedAddr = mr.Addr()
		}
		c, err := relock.New(rc, relock.WithWatchdogTimeout(d.cfg.watchdog), relock.WithLogger(log))
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() { c.Close() })
		nodes = append(nodes, c)
		addrs = append(addrs, mr.Addr())
	}
	d.m = redlock.New(nodes, d.cfg.name)
	d.where = fmt.Sprintf("%d embedded miniredis masters at %s; a majority of %d holds the lock", redlockMasters, strings.Join(addrs, ", "), redlockMasters/2+1)
	d.killAt = max(1, d.cfg.workers*d.cfg.rounds/2)
	return closeAll, nil
}

// killMaster kills one master; the worker that made acquisition killAt
// calls it at the end of its hold, before it releases the lock, so the
// acquisitions after it run on the masters left.
func (d *demo) killMaster() {
	d.kill()
	d.mu.Lock()
	d.killedAfter = d.grants
	d.mu.Unlock()
	d.event(time.Now(), fmt.Sprintf("main      KILLED master %d of %d (%s); the lock keeps working on the %d left, a majority",
		killedMaster+1, redlockMasters, d.killedAddr, redlockMasters-1))
}

// newRedis connects to the Redis server at addr. Client-side caching is
// disabled: relock does not use it, and miniredis lacks the CLIENT TRACKING
// it needs. An embedded miniredis needs two more settings:
//   - standalone mode: miniredis answers CLUSTER SLOTS as a one-node cluster,
//     so rueidis would pick cluster mode, in which relock wakes waiters with
//     SPUBLISH and SSUBSCRIBE, which miniredis does not have;
//   - RESP2: with RESP3 rueidis subscribes on the connection it sends
//     commands on, as Redis 6+ allows, but miniredis refuses any command
//     but (P)SUBSCRIBE, PING and QUIT on a subscribed connection. With RESP2
//     rueidis subscribes on a connection of its own.
func newRedis(addr string, embedded bool) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		ForceSingleClient: embedded,
		AlwaysRESP2:       embedded,
	})
}

// demo is one run of the demo: its workers and the referee that checks them.
type demo struct {
	cfg   demoConfig
	m     relock.Locker // a *mutex.Mutex, a *redlock.Mutex or a semaphoreLocker
	out   io.Writer     // safe for concurrent use
	where string        // the Redis the lock lives on, for the header
	start time.Time

	// The redlock demo's killing of a master; kill is nil for a mutex.
	kill       func()
	killedAddr string
	killAt     int // the acquisition whose holder kills the master

	// sem referees a semaphore, whose holds overlap, instead of holder;
	// nil for a lock.
	sem *semaphoreReferee

	held chan struct{} // closed once worker 1 holds the mutex for the first time
	gate chan struct{} // closed once the TryLock probe is done: the other workers may start

	// holder is the in-process slot of the worker that holds the mutex, 0
	// when none: a worker that finds it taken when it acquires, or taken
	// from it while it holds, has found two holders at once. Unused for a
	// semaphore.
	holder atomic.Int64

	mu              sync.Mutex    // guards the fields below
	unlocking       chan struct{} // closed when the last release's Unlock returned and was printed
	releasedAt      time.Time     // when the last release began
	grants          int
	firstToken      int64
	lastToken       int64 // token of the last grant
	maxWait         time.Duration
	killedAfter     int // acquisitions before the master was killed; 0: not killed
	handoffs        int // grants to a worker that was waiting when the lock was released
	maxHandoff      time.Duration
	violations      int // of either kind
	tokenViolations int
	errors          int
}

// run runs the workers and the TryLock probe, and returns when all are done.
func (d *demo) run(ctx context.Context, stderr io.Writer) {
	d.start = time.Now()
	var wg sync.WaitGroup
	first := make(chan struct{}) // closed when worker 1 returns
	for id := 1; id <= d.cfg.workers; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if id == 1 {
				defer close(first)
			}
			if err := d.worker(ctx, id); err != nil && !stoppedBy(ctx, err) {
				d.fail(stderr, "worker %d: %v", id, err)
			}
		}()
	}
	// Worker 1 goes first; while it holds the mutex, TryLock must fail.
	// Then the others start and queue up behind it.
	select {
	case <-d.held:
		d.probeTryLock(ctx, stderr)
	case <-first:
	case <-ctx.Done():
	}
	close(d.gate)
	wg.Wait()
	if ctx.Err() != nil {
		d.fail(stderr, "stopped before the end: %v", context.Cause(ctx))
	}
}

// stoppedBy reports whether err is ctx's end: the demo timed out or was
// interrupted, which run reports once for all workers.
func stoppedBy(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx)))
}

// worker locks the mutex d.cfg.rounds times.
func (d *demo) worker(ctx context.Context, id int) error {
	if id != 1 {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	for round := 1; round <= d.cfg.rounds; round++ {
		if round > 1 {
			// Work outside the lock, so that the others get their turn: a
			// mutex is not fair, and a worker that locked again at once
			// would usually beat the waiters it just woke.
			if err := pause(ctx, d.cfg.hold/2); err != nil {
				return err
			}
		}
		if err := d.round(ctx, id, round); err != nil {
			return err
		}
	}
	return nil
}

// round is one acquisition of the mutex by worker id: lock, check, hold,
// check, unlock.
func (d *demo) round(ctx context.Context, id, round int) (err error) {
	asked := time.Now()
	lease, err := d.m.Lock(ctx)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	got := time.Now()
	kill := d.acquired(id, lease.Token(), asked, got)
	defer func() {
		if kill {
			// Before the release, which wakes the waiters: every
			// acquisition after this one runs on the masters left. The
			// holder keeps the lock (a majority of its masters is left)
			// and releases it on the four.
			d.killMaster()
		}
		if uerr := d.release(id, lease, got); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()

	if id == 1 && round == 1 {
		probe := d.probeReentry
		if d.sem != nil {
			probe = d.probeNotReentrant
		}
		if err := probe(lease); err != nil {
			return err
		}
		close(d.held)
		select {
		case <-d.gate:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	t := time.NewTimer(d.cfg.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-lease.Context().Done():
		return fmt.Errorf("lease lost while holding %s: %w", d.cfg.name, context.Cause(lease.Context()))
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	switch h := d.holder.Load(); {
	case d.sem != nil: // checked at each grant: holds overlap
	case h == int64(id):
	case h == 0:
		d.violation("while worker %d held %s, another worker took and released it", id, d.cfg.name)
	default:
		d.violation("while worker %d held %s, worker %d took it", id, d.cfg.name, h)
	}
	return nil
}

// acquired records and prints a grant to worker id of token, asked for at
// asked and returned at got, and checks it against the previous grant. It
// reports whether the worker must now kill a master (redlock).
func (d *demo) acquired(id int, token int64, asked, got time.Time) (kill bool) {
	d.mu.Lock()
	unlocking := d.unlocking
	d.mu.Unlock()
	if unlocking != nil {
		// The previous holder's Unlock may not have returned yet: the
		// release wakes the waiters before it answers. Print after its line.
		<-unlocking
	}
	var prev int64
	if d.sem == nil {
		prev = d.holder.Swap(int64(id))
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.grants++
	kill = d.kill != nil && d.grants == d.killAt
	wait := got.Sub(asked)
	d.maxWait = max(d.maxWait, wait)
	line := fmt.Sprintf("worker %-2d acquired %s  token=%d  waited=%s", id, d.cfg.name, token, ms(wait))
	if !d.releasedAt.IsZero() && asked.Before(d.releasedAt) {
		// It was waiting when the lock was released.
		h := got.Sub(d.releasedAt)
		d.handoffs++
		d.maxHandoff = max(d.maxHandoff, h)
		line += "  handoff=" + ms(h)
	}
	d.event(got, line)
	if d.sem != nil {
		d.sem.acquiredLocked(d, id, token, asked, got)
		if d.grants == 1 {
			d.firstToken = token
		}
		d.lastToken = max(d.lastToken, token)
		return false
	}
	if prev != 0 {
		d.violationLocked("worker %d acquired %s while worker %d held it", id, d.cfg.name, prev)
	}
	if d.grants == 1 {
		d.firstToken = token
	} else if token <= d.lastToken {
		d.tokenViolations++
		d.violationLocked("worker %d got token %d, not greater than the previous grant's %d", id, token, d.lastToken)
	}
	d.lastToken = token
	return kill
}

// release gives up worker id's hold, acquired at got, and unlocks the lease.
func (d *demo) release(id int, lease *relock.Lease, got time.Time) error {
	d.holder.CompareAndSwap(int64(id), 0) // a hold taken from id was reported when found
	done := make(chan struct{})
	defer close(done)
	now := time.Now()
	d.mu.Lock()
	if d.sem != nil {
		d.sem.releasedLocked()
	}
	d.releasedAt = now
	d.unlocking = done
	d.mu.Unlock()
	if err := lease.Unlock(); err != nil {
		return err
	}
	// Stamped when the release began, as hand-offs are measured from it:
	// the waiters are woken before Unlock returns.
	d.event(now, fmt.Sprintf("worker %-2d released %s  held=%s", id, d.cfg.name, ms(now.Sub(got))))
	return nil
}

// probeReentry shows that the holder's call chain cannot lock the mutex
// again: lease.Context carries the ownership, and a plain mutex would wait
// for itself.
func (d *demo) probeReentry(lease *relock.Lease) error {
	ctx, cancel := context.WithTimeout(lease.Context(), probeTimeout)
	defer cancel()
	again, err := d.m.Lock(ctx)
	switch {
	case err == nil:
		if uerr := again.Unlock(); uerr != nil {
			return fmt.Errorf("Lock(lease.Context()) re-entered the mutex, and its Unlock failed: %w", uerr)
		}
		return errors.New("Lock(lease.Context()) re-entered the mutex; want relock.ErrWouldDeadlock")
	case errors.Is(err, relock.ErrWouldDeadlock):
		d.event(time.Now(), fmt.Sprintf("worker %-2d Lock(lease.Context()) → ErrWouldDeadlock: %s", 1, oneLine(err)))
		return nil
	default:
		return fmt.Errorf("Lock(lease.Context()): %w; want relock.ErrWouldDeadlock", err)
	}
}

// probeTryLock shows TryLock failing at once while worker 1 holds the mutex.
func (d *demo) probeTryLock(ctx context.Context, stderr io.Writer) {
	lease, err := d.m.TryLock(ctx)
	switch {
	case err == nil:
		// Worker 1 holds the mutex: two holders at once. Give it back.
		d.violation("main's TryLock acquired %s while worker 1 held it", d.cfg.name)
		if uerr := lease.Unlock(); uerr != nil {
			d.fail(stderr, "main: unlock: %v", uerr)
		}
	case errors.Is(err, relock.ErrNotAcquired) && d.sem != nil:
		d.event(time.Now(), fmt.Sprintf("main      TryAcquire(%d) → ErrNotAcquired: %s", d.cfg.permits, oneLine(err)))
	case errors.Is(err, relock.ErrNotAcquired):
		d.event(time.Now(), fmt.Sprintf("main      TryLock → ErrNotAcquired: %s", oneLine(err)))
	default:
		d.fail(stderr, "main: TryLock: %v", err)
	}
}

// summary prints what the run showed.
func (d *demo) summary() {
	d.mu.Lock()
	defer d.mu.Unlock()
	elapsed := time.Since(d.start)
	fmt.Fprintf(d.out, "\nsummary: %s by %s in %s, max wait %s\n",
		plural(int64(d.grants), "acquisition"), plural(int64(d.cfg.workers), "worker"), ms(elapsed), ms(d.maxWait))
	fmt.Fprintf(d.out, "  violations=%d  ", d.violations)
	switch {
	case d.violations == 0 && d.sem != nil:
		fmt.Fprintf(d.out, "never more holders of %s than its %s; at most %d at once\n", d.cfg.name, plural(int64(d.sem.permits), "permit"), d.sem.most)
	case d.violations == 0:
		fmt.Fprintf(d.out, "never two holders of %s at the same time\n", d.cfg.name)
	default:
		fmt.Fprintf(d.out, "mutual exclusion or token order was broken (see above)\n")
	}
	switch {
	case d.grants == 0:
		fmt.Fprintf(d.out, "  no tokens: the mutex was never acquired\n")
	case d.grants == 1:
		fmt.Fprintf(d.out, "  one token: %d\n", d.firstToken)
	case d.tokenViolations == 0 && d.sem != nil:
		fmt.Fprintf(d.out, "  tokens increasing  %d … %d, each grant's greater than those of the grants before it\n", d.firstToken, d.lastToken)
	case d.tokenViolations == 0:
		fmt.Fprintf(d.out, "  tokens increasing  %d … %d, each grant's greater than the one before\n", d.firstToken, d.lastToken)
	default:
		fmt.Fprintf(d.out, "  tokens NOT increasing (see above)\n")
	}
	if d.kill != nil {
		if d.killedAfter == 0 {
			fmt.Fprintf(d.out, "  masters: none was killed (the run ended first)\n")
		} else {
			fmt.Fprintf(d.out, "  masters: master %d of %d was killed after acquisition %d; %s after it, on the %d masters left\n",
				killedMaster+1, redlockMasters, d.killedAfter, plural(int64(d.grants-d.killedAfter), "acquisition"), redlockMasters-1)
		}
	}
	if d.handoffs == 0 {
		fmt.Fprintf(d.out, "  wake-ups: no worker was waiting when the mutex was released\n")
		return
	}
	fmt.Fprintf(d.out, "  wake-ups: %s to a waiting worker, the slowest %s after the release began;\n",
		plural(int64(d.handoffs), "hand-off"), ms(d.maxHandoff))
	fmt.Fprintf(d.out, "            no polling: a waiter sleeps until a release wakes it; its only timer is the\n")
	fmt.Fprintf(d.out, "            holder's lease (%v here), capped at a few seconds, in case a wake-up is lost\n", d.cfg.watchdog)
	switch {
	case d.sem != nil:
		fmt.Fprintf(d.out, "  fairness: a release hands its permit to the first waiter in arrival order, and wakes only it\n")
	case d.cfg.workers > 2:
		fmt.Fprintf(d.out, "  fairness: a release wakes a waiter of each client and the first to ask wins, until a waiter has waited 50ms: it then queues, and the lock goes in queue order (package fair grants in arrival order always)\n")
	}
}

// event prints line stamped with t's offset from the start.
func (d *demo) event(t time.Time, line string) {
	fmt.Fprintf(d.out, "%10s  %s\n", ms(t.Sub(d.start)), line)
}

// violation prints and counts a broken promise of the lock.
func (d *demo) violation(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.violationLocked(format, args...)
}

func (d *demo) violationLocked(format string, args ...any) {
	d.violations++
	d.event(time.Now(), "VIOLATION: "+fmt.Sprintf(format, args...))
}

// fail prints and counts an error.
func (d *demo) fail(stderr io.Writer, format string, args ...any) {
	d.mu.Lock()
	d.errors++
	d.mu.Unlock()
	fmt.Fprintf(stderr, "relock demo: %s\n", oneLine(fmt.Errorf(format, args...)))
}

// oneLine returns err's message on one line: relock joins errors (held by
// another, ctx ended) with errors.Join, whose message has a line for each.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// pause waits for d, or returns ctx's cause when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// ms formats d in milliseconds with one decimal.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
