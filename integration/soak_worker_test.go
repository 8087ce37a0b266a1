package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/faultproxy"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// The soak's lock configuration, shared by workers and checker.
const (
	soakWatchdog      = 1500 * time.Millisecond // Client lease: WithWatchdogTimeout
	soakFixedLease    = time.Second             // WithLease of the chaos goroutines' leased locks
	soakWaiterTimeout = 2 * time.Second         // WithWaiterTimeout of every kind: queued waiters' places
	soakSteadyWait    = 8 * time.Second         // Lock deadline of the steady goroutines
)

// soakKinds are what every worker runs, each by a steady goroutine (long
// Lock deadlines, watchdog leases, always unlocks) and a chaos goroutine
// (deadlines from 10 ms to 1.5 s, some fixed leases, some left to expire).
var soakKinds = []string{"mutex", "reentrant", "fair", "rw-write", "rw-read"}

// soakLockName returns the lock a soak kind contends for; the rwlock's two
// sides share one.
func soakLockName(kind string) string {
	if strings.HasPrefix(kind, "rw-") {
		return "soak:rw"
	}
	return "soak:" + kind
}

// soakThink is the pause between a goroutine's holds, so that a releasing
// goroutine does not win every race against the woken waiters. The
// rwlock's writers think longer: with writer preference a steady stream of
// writers would starve the readers by design.
func soakThink(kind string, rng *rand.Rand) time.Duration {
	if kind == "rw-write" {
		return time.Duration(60+rng.IntN(200)) * time.Millisecond
	}
	return time.Duration(5+rng.IntN(25)) * time.Millisecond
}

// soakStore is the fenced resource on the unfaulted Redis: one hash per
// lock. Writers read then write with their token; readers read. A read or
// write whose token is below what the resource has seen is rejected and
// counted as stale; a write whose expected value is not the current one
// (an update lost between a read and a write that were both accepted) is
// applied and counted in "lost": the violation the fence must prevent.
//
//	KEYS[1] the resource hash: v value, a highest token seen, w highest
//	        writer token, acc/stale/lost/reads counters
//	ARGV[1] "wread" (a writer's read), "write", or "rread" (a reader's)
//	ARGV[2] token
//	ARGV[3] write: the value read
//	ARGV[4] write: the new value
//	returns {1, value} accepted, {0, 0} stale, {2, value} lost update
var soakStore = rueidis.NewLuaScript(`
local tok = tonumber(ARGV[2])
local a = tonumber(redis.call('hget', KEYS[1], 'a') or '0')
local w = tonumber(redis.call('hget', KEYS[1], 'w') or '0')
local v = tonumber(redis.call('hget', KEYS[1], 'v') or '0')
if ARGV[1] == 'rread' then
  if tok < w then
    redis.call('hincrby', KEYS[1], 'stale', 1)
    return {0, 0}
  end
  if tok > a then redis.call('hset', KEYS[1], 'a', ARGV[2]) end
  redis.call('hincrby', KEYS[1], 'reads', 1)
  return {1, v}
end
if tok < a then
  redis.call('hincrby', KEYS[1], 'stale', 1)
  return {0, 0}
end
redis.call('hset', KEYS[1], 'a', ARGV[2], 'w', ARGV[2])
if ARGV[1] == 'wread' then return {1, v} end
redis.call('hset', KEYS[1], 'v', ARGV[4])
if v ~= tonumber(ARGV[3]) then
  redis.call('hincrby', KEYS[1], 'lost', 1)
  return {2, v}
end
redis.call('hincrby', KEYS[1], 'acc', 1)
return {1, v}
`)

// The store's reply codes.
const (
	storeStale    = 0
	storeAccepted = 1
	storeLost     = 2
	storeFailed   = -1 // the store did not answer: not a verdict
)

// soakResource is the store's key for lock name under the run's prefix.
func soakResource(prefix, name string) string { return prefix + ":res:" + name }

// soakLog writes a worker's records, one per line, with wall-clock
// timestamps in Unix nanoseconds (see TestSoak on why wall clock).
type soakLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func (l *soakLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

func (l *soakLog) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		return err
	}
	return l.f.Sync()
}

func now() int64 { return time.Now().UnixNano() }

// soakWorker is one worker process's state.
type soakWorker struct {
	id     int
	seed   uint64
	prefix string
	data   rueidis.Client // the fenced store, direct
	lockRC rueidis.Client // the lock Redis, through proxy
	proxy  *faultproxy.Proxy
	log    *soakLog
	phase  int // phases started, numbering the goroutines' random streams
	probes int // expiry probes run
}

// childSoak: args id seed lock-addr log-path prefix. The soak's worker
// (see TestSoak): it proxies the lock Redis, runs every kind in goroutines
// and obeys commands on stdin, one per line, answering each with
// "ok <command> <unix ns>" once applied:
//
//	start            a new relock Client and its goroutines
//	quiesce          stop the goroutines, unlock, Close the Client, count
//	                 relock's goroutines left (record "goroutines")
//	latency <d>      proxy: add d each way
//	blackhole        proxy: forward nothing
//	stall <i>        proxy: hold the i-th connection
//	drop             proxy: close every connection
//	heal             proxy: end latency, blackhole and stalls
//	expiry           the expiry probe (record "expiry"; see expiryProbe)
//	final            Lock of every kind on a closed rueidis client (record "closed")
//
// It exits when stdin closes. rc is the fenced store's client.
func childSoak(t *testing.T, rc rueidis.Client, args []string) {
	if len(args) != 5 {
		t.Fatalf("soak: args %q", args)
	}
	id := atoi(t, args[0])
	seed, err := strconv.ParseUint(args[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(args[2])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	lockRC, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lockRC.Close()
	f, err := os.Create(args[3])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &soakWorker{id: id, seed: seed, prefix: args[4], data: rc, lockRC: lockRC, proxy: proxy,
		log: &soakLog{w: bufio.NewWriterSize(f, 1<<16), f: f}}
	defer w.log.flush()

	lagDone := make(chan struct{})
	lagStopped := make(chan struct{})
	go func() {
		defer close(lagStopped)
		w.probeLag(lagDone)
	}()
	defer func() { close(lagDone); <-lagStopped }()

	var stop func() // ends the running phase; nil when none runs
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd := strings.Fields(in.Text())
		if len(cmd) == 0 {
			continue
		}
		switch cmd[0] {
		case "start":
			if stop == nil {
				stop = w.start()
			}
		case "quiesce":
			if stop != nil {
				stop()
				stop = nil
			}
			w.countGoroutines()
		case "latency":
			d, err := time.ParseDuration(cmd[1])
			if err != nil {
				t.Fatal(err)
			}
			proxy.SetLatency(d)
		case "blackhole":
			proxy.Blackhole()
		case "stall":
			proxy.Stall(atoi(t, cmd[1]))
		case "drop":
			proxy.DropAll()
		case "heal":
			proxy.Heal()
		case "expiry":
			w.expiryProbe()
		case "final":
			if stop != nil {
				stop()
				stop = nil
			}
			w.closedClient()
		default:
			t.Fatalf("soak: unknown command %q", cmd)
		}
		if err := w.log.flush(); err != nil {
			t.Fatal(err)
		}
		say("ok %s %d", cmd[0], now())
	}
	if stop != nil {
		stop()
	}
}

// soakLagTick is the lag probe's period; a tick late by more than
// soakLagMin is recorded.
const (
	soakLagTick = 10 * time.Millisecond
	soakLagMin  = 10 * time.Millisecond
)

// probeLag records when this process's goroutines could not run on time
// (a loaded machine, a GC pause, SIGSTOP) as "lag worker at-ns late-ns":
// the checker does not blame relock for a deadline overrun that such a
// lag explains.
func (w *soakWorker) probeLag(done <-chan struct{}) {
	t := time.NewTicker(soakLagTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case at := <-t.C:
			_ = at // the ticker's own time is when it was due, not when we ran
			now := time.Now()
			if late := now.Sub(last) - soakLagTick; late > soakLagMin {
				w.log.printf("lag %d %d %d", w.id, now.UnixNano(), late.Nanoseconds())
			}
			last = now
		}
	}
}

// start creates a Client and runs every kind's goroutines on it until the
// returned stop is called; stop unlocks, closes the Client and records its
// time as "stop <worker> <ns>".
func (w *soakWorker) start() (stop func()) {
	w.phase++
	c, err := relock.New(w.lockRC, relock.WithWatchdogTimeout(soakWatchdog))
	if err != nil {
		panic(err) // options are constants: cannot happen
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for k, kind := range soakKinds {
		for _, steady := range []bool{true, false} {
			g := &soakGoroutine{w: w, kind: kind, steady: steady, gid: 2 * k}
			if !steady {
				g.gid++
			}
			g.rng = rand.New(rand.NewPCG(w.seed, uint64(w.id)<<32|uint64(w.phase)<<8|uint64(g.gid)))
			g.plain, g.leased = soakLockers(c, kind)
			wg.Go(func() { g.run(ctx) })
		}
	}
	return func() {
		w.log.printf("stop %d %d", w.id, now())
		cancel()
		wg.Wait()
		c.Close()
	}
}

// soakLockers returns kind's lock on c with the Client's watchdog lease,
// and with a fixed lease (nil where the kind runs without one).
func soakLockers(c *relock.Client, kind string) (plain, leased relock.Locker) {
	name := soakLockName(kind)
	waiter := relock.WithWaiterTimeout(soakWaiterTimeout)
	fixed := relock.WithLease(soakFixedLease)
	switch kind {
	case "mutex":
		return mutex.New(c, name, waiter), mutex.New(c, name, waiter, fixed)
	case "reentrant":
		return reentrant.New(c, name, waiter), reentrant.New(c, name, waiter, fixed)
	case "fair":
		return fair.New(c, name, waiter), fair.New(c, name, waiter, fixed)
	case "rw-write":
		return rwlock.New(c, name, waiter).Locker(), rwlock.New(c, name, waiter, fixed).Locker()
	case "rw-read":
		return rwlock.New(c, name, waiter).RLocker(), rwlock.New(c, name, waiter, fixed).RLocker()
	}
	panic("soak: unknown kind " + kind)
}

// soakGoroutine is one lock loop of a worker.
type soakGoroutine struct {
	w      *soakWorker
	kind   string
	gid    int
	steady bool
	rng    *rand.Rand
	plain  relock.Locker
	leased relock.Locker
}

// sleep waits d or until ctx ends, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// run locks, works under the lock and unlocks until ctx ends, recording
// each Lock call as a "lock" record:
//
//	lock kind worker gid steady|chaos|leased call deadline ret outcome token valid end endcause acc stale lost
//
// with times in Unix ns: call and ret around Lock, deadline the Lock ctx's,
// valid the lease's ValidUntil at ret, end the end of the hold by the
// holder's own view: the earliest of the Unlock call, its Context observed
// done, and its last ValidUntil (0 when not acquired). acc, stale and lost
// count the hold's fenced operations.
func (g *soakGoroutine) run(ctx context.Context) {
	w := g.w
	for sleep(ctx, soakThink(g.kind, g.rng)) {
		mode, lk, d := "steady", g.plain, soakSteadyWait
		forget := false
		if !g.steady {
			mode = "chaos"
			// Log-uniform from 10 ms to 1.5 s: many short deadlines that
			// end during an attempt, some that outlast a fault.
			d = time.Duration(float64(10*time.Millisecond) * math.Pow(150, g.rng.Float64()))
			if g.rng.IntN(3) == 0 {
				mode, lk = "leased", g.leased
				// Fair holds are forgotten more often: a queue handing on
				// from one expired lease to the next must wake each next holder.
				forget = g.rng.IntN(3) == 0 || (g.kind == "fair" && g.rng.IntN(2) == 0)
			}
		}
		lctx, cancel := context.WithTimeout(ctx, d)
		deadline, _ := lctx.Deadline()
		call := now()
		lease, err := lk.Lock(lctx)
		ret := now()
		if err != nil {
			cancel()
			w.log.printf("lock %s %d %d %s %d %d %d %s 0 0 0 - 0 0 0", g.kind, w.id, g.gid, mode, call, deadline.UnixNano(), ret, soakOutcome(err))
			if soakOutcome(err) == "error" {
				w.log.printf("note %d %d %s %q", w.id, ret, g.kind, err.Error())
			}
			continue
		}
		valid := lease.ValidUntil().UnixNano()
		end, cause, ops := g.hold(ctx, lk, lease, forget)
		cancel()
		w.log.printf("lock %s %d %d %s %d %d %d ok %d %d %d %s %d %d %d", g.kind, w.id, g.gid, mode, call, deadline.UnixNano(), ret,
			lease.Token(), valid, end, cause, ops[0], ops[1], ops[2])
	}
}

// soakOutcome classifies a Lock error.
func soakOutcome(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "stopped"
	case errors.Is(err, relock.ErrClosed):
		return "closed"
	}
	return "error"
}

// hold works under lease and ends it: a nested re-entry where the kind has
// one, one to three fenced operations while the lease is certainly held,
// then Unlock, or, for a forgotten fixed lease, waiting for its expiry. It
// returns the end of the hold by its own view, why it ended (unlock, lost,
// forgot) and the fenced operations' outcomes (accepted, stale, lost).
// The end of the phase cuts a wait for expiry short: the lease is unlocked.
func (g *soakGoroutine) hold(phase context.Context, lk relock.Locker, lease *relock.Lease, forget bool) (end int64, cause string, ops [3]int) {
	w := g.w
	var doneAt atomic.Int64 // when the lease's Context was seen done
	stopWatch := context.AfterFunc(lease.Context(), func() { doneAt.Store(now()) })
	defer stopWatch()

	var inner *relock.Lease
	if g.kind == "reentrant" || ((g.kind == "fair" || g.kind == "rw-write") && g.rng.IntN(4) == 0) {
		rctx, cancel := context.WithTimeout(lease.Context(), time.Second)
		l, err := lk.Lock(rctx)
		cancel()
		switch {
		case err == nil && l.Token() != lease.Token():
			w.log.printf("viol %d %d %s re-entry token %d, hold token %d", w.id, now(), g.kind, l.Token(), lease.Token())
			inner = l
		case err == nil:
			inner = l
		}
	}

	resource := soakResource(w.prefix, soakLockName(g.kind))
	tok := strconv.FormatInt(lease.Token(), 10)
	for n := 1 + g.rng.IntN(3); n > 0; n-- {
		if lease.Context().Err() != nil || !time.Now().Before(lease.ValidUntil()) {
			break
		}
		switch g.fenced(resource, tok) {
		case storeAccepted:
			ops[0]++
		case storeStale:
			ops[1]++
		case storeLost:
			ops[2]++
		}
		if !sleep(lease.Context(), time.Duration(g.rng.IntN(5))*time.Millisecond) {
			break
		}
	}

	if forget {
		// Left to expire: its Context must end once ValidUntil passes.
		guard := time.NewTimer(time.Until(lease.ValidUntil()) + 2*time.Second)
		start := now()
		select {
		case <-lease.Context().Done():
			cause = "forgot"
		case <-guard.C:
			w.log.printf("late %d %s %d %d %d", w.id, g.kind, start, now(), lease.ValidUntil().UnixNano())
		case <-phase.Done():
		}
		guard.Stop()
	}
	unlockAt := now()
	valid := lease.ValidUntil().UnixNano()
	if inner != nil {
		inner.Unlock()
	}
	err := lease.Unlock()
	end = min(unlockAt, valid)
	if d := doneAt.Load(); d != 0 && d < end {
		end = d
		if cause == "" {
			cause = "lost"
		}
	}
	if cause == "" {
		cause = "unlock"
		if errors.Is(err, relock.ErrLockLost) {
			cause = "lost"
		}
	}
	return end, cause, ops
}

// fenced runs one fenced operation: a reader's read, or a writer's read
// then write of value + 1. It returns the store's verdict.
func (g *soakGoroutine) fenced(resource, tok string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc := g.w.data
	op := "wread"
	if g.kind == "rw-read" {
		op = "rread"
	}
	v, err := soakStore.Exec(ctx, rc, []string{resource}, []string{op, tok, "0", "0"}).AsIntSlice()
	if err != nil {
		g.w.log.printf("note %d %d store %q", g.w.id, now(), err.Error())
		return storeFailed
	}
	if v[0] != storeAccepted || op == "rread" {
		return int(v[0])
	}
	read := strconv.FormatInt(v[1], 10)
	v, err = soakStore.Exec(ctx, rc, []string{resource}, []string{"write", tok, read, strconv.FormatInt(v[1]+1, 10)}).AsIntSlice()
	if err != nil {
		g.w.log.printf("note %d %d store %q", g.w.id, now(), err.Error())
		return storeFailed
	}
	return int(v[0])
}

// countGoroutines records, after the Client's Close, the goroutines still
// running relock's code (excluding this test and the proxy), which must be
// none: "goroutines worker ns relock total links". It waits up to 2 s for
// them to end (a context.AfterFunc may still be finishing) and writes their
// stacks to the log as "stack" lines when some stay.
func (w *soakWorker) countGoroutines() {
	var n int
	var stacks []string
	for deadline := time.Now().Add(2 * time.Second); ; {
		n, stacks = relockGoroutines()
		if n == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling goroutine exit: there is nothing to wait on
	}
	w.log.printf("goroutines %d %d %d %d %d", w.id, now(), n, runtime.NumGoroutine(), w.proxy.Links())
	for _, s := range stacks {
		w.log.printf("stack %d %q", w.id, s)
	}
}

// relockGoroutines returns the goroutines whose stack runs or was started
// by relock's packages, besides this test package and the fault proxy.
func relockGoroutines() (int, []string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			// Function lines (file lines start with a tab) of relock's
			// packages, not the test's own or its harness's.
			if strings.HasPrefix(line, "\t") || !strings.Contains(line, "github.com/relockgo/relock") {
				continue
			}
			if !strings.Contains(line, "relock/integration.") &&
				!strings.Contains(line, "relock/internal/faultproxy.") &&
				!strings.Contains(line, "relock/internal/redistest.") {
				found = append(found, g)
				break
			}
		}
	}
	return len(found), found
}

// closedClient checks that Lock of every kind on a Client
// whose rueidis client is closed returns ErrClosed at once, recorded as
// "closed worker kind took-ns is-ErrClosed error". It closes w.lockRC.
func (w *soakWorker) closedClient() {
	c, err := relock.New(w.lockRC, relock.WithWatchdogTimeout(soakWatchdog))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	w.lockRC.Close()
	// rueidis v1.0.79 picks a random pipelined connection for a keyed
	// command, and a connection being dialed while Close runs survives it
	// (mux._pipe stores it over the closed one): seen once per run on one
	// worker. Then rueidis itself still serves, relock cannot know, and
	// the check does not apply.
	for i := range 16 {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := w.lockRC.Do(pctx, w.lockRC.B().Get().Key("soak:probe:"+strconv.Itoa(i)).Build()).Error()
		cancel()
		if err == nil || rueidis.IsRedisNil(err) {
			w.log.printf("note %d %d rueidis still answered a GET after Close: the closed-client check is skipped", w.id, now())
			return
		}
	}
	for _, kind := range soakKinds {
		plain, _ := soakLockers(c, kind)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		began := time.Now()
		lease, err := plain.Lock(ctx)
		took := time.Since(began)
		cancel()
		if err == nil {
			lease.Unlock()
			err = errors.New("acquired")
		}
		w.log.printf("closed %d %s %d %t %q", w.id, kind, took.Nanoseconds(), errors.Is(err, relock.ErrClosed), err.Error())
	}
}

// The expiry probe's lock and lease.
const (
	soakExpiryName  = "soak:expiry"
	soakExpiryLease = 300 * time.Millisecond
)

// expiryProbe checks, as a soak step, that expiries alone hand a fair
// lock on: every worker's
// soakExpiryHolders goroutines, at once, each Lock a fair lock of their own
// with a fixed lease, on a Client of their own, and never unlock it. Only
// expiries hand the lock on, so each must be followed promptly by the next
// grant (checkSoakExpiry); the soak's other fair traffic, whose arrivals
// wake the queue, would hide a queue that an expiry does not wake. Each
// grant is recorded as "expiry worker probe call ret valid token", or, when
// Lock failed, with ret 0.
func (w *soakWorker) expiryProbe() {
	w.probes++
	c, err := relock.New(w.lockRC, relock.WithWatchdogTimeout(soakWatchdog))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	lk := fair.New(c, soakExpiryName, relock.WithLease(soakExpiryLease), relock.WithWaiterTimeout(soakWaiterTimeout))
	var wg sync.WaitGroup
	for range soakExpiryHolders {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), soakExpiryWait)
			defer cancel()
			call := now()
			lease, err := lk.Lock(ctx)
			if err != nil {
				w.log.printf("expiry %d %d %d 0 0 0", w.id, w.probes, call)
				w.log.printf("note %d %d expiry-probe %q", w.id, now(), err.Error())
				return
			}
			w.log.printf("expiry %d %d %d %d %d %d", w.id, w.probes, call, now(), lease.ValidUntil().UnixNano(), lease.Token())
			<-lease.Context().Done() // left to expire
		})
	}
	wg.Wait()
}
