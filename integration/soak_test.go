package integration

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/fair"
	"github.com/relockgo/relock/internal/redistest"
	"github.com/relockgo/relock/mutex"
	"github.com/relockgo/relock/reentrant"
	"github.com/relockgo/relock/rwlock"
)

// The soak's environment.
const (
	envSoak     = "RELOCK_SOAK"     // how long the soak runs, a Go duration; default soakDefault
	envSoakSeed = "RELOCK_SEED"     // the schedule's seed; default from the clock, printed
	envSoakDir  = "RELOCK_SOAK_DIR" // where the workers' logs go and stay; default a temporary directory
	soakDefault = 60 * time.Second
	soakWorkers = 4
)

// Phases of the schedule.
const (
	soakCalm     = 6 * time.Second                         // after each heal, no fault
	soakSettle   = 3 * time.Second                         // from a heal to the strict checks: leftovers of the fault have expired (lease, waiter timeout)
	soakLiveness = soakWatchdog + 2*time.Second            // after a heal, every worker acquires every kind within this
	soakQuiesceN = 3                                       // quiesce every this many cycles
	soakFaultMax = 3 * time.Second                         // longest fault period
	soakTail     = soakCalm + soakFaultMax + 5*time.Second // room kept at the end for the last cycle and the final checks

	// The expiry probe (soakWorker.expiryProbe), run in the calm window
	// after each start: every worker's holders queue on one fair lock
	// that only lease expiries hand on.
	soakExpiryHolders = 2
	soakExpiryWait    = 15 * time.Second // each holder's Lock deadline: far above the 8 leases queued
)

// TestSoak is the fault soak: soakWorkers worker processes (role
// "soak", see childSoak) each run every kind in goroutines through an
// in-process TCP proxy to a dedicated lock Redis, doing fenced
// read-modify-writes on a second, unfaulted Redis, while the test injects
// faults on a schedule derived from the seed: proxy latency, blackholes,
// stalled connections and dropped connections; paused workers (SIGSTOP);
// a paused and a restarted lock Redis (a restart loses every lock); a
// worker paused across such a restart (it reads, late, the hand-overs of
// grants that Redis has forgotten); and CLIENT KILL TYPE pubsub. Each fault period is followed by a calm window;
// every few cycles the workers quiesce (stop, unlock, Close their Client)
// and the test probes the locks: each must be free. After each start, the
// workers run the expiry probe (soakWorker.expiryProbe): a queue of fair
// holders that only lease expiries hand the lock on to.
//
// Workers log every Lock call and hold with wall-clock timestamps (Unix
// ns). Wall clock rather than monotonic, because the comparisons are
// across processes: on one host every process reads the same
// CLOCK_REALTIME, so the stamps are comparable to within the clock's
// adjustments during the run (NTP slews by at most 0.05%: under 1 ms over
// a lease), which the checker's tolerance (soakTolerance) covers; a clock
// step during the run would void the comparison. Go's monotonic readings
// are per process and cannot be compared.
//
// The checker (soak_check_test.go) then asserts exclusion and fencing,
// liveness after each heal, FIFO order, no stalls, Lock's ctx bound and
// closed clients, and prints
// a table per kind. Run longer with RELOCK_SOAK=10m, replay with
// RELOCK_SEED=N (the schedule is a function of the seed; the interleavings
// are not).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak needs Redis")
	}
	dur, seed := soakConfig(t)
	t.Logf("soak: seed %d, %v, %d workers (replay: %s=%d %s=%v)", seed, dur, soakWorkers, envSoakSeed, seed, envSoak, dur)
	fmt.Printf("soak: seed %d\n", seed) // on stdout too, so a CI log shows it whatever fails

	lockSrv := redistest.New(t)
	dataSrv := redistest.Shared(t)
	dataRC := dataSrv.Client(t)
	adminRC, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      []string{lockSrv.Addr()},
		DisableCache:     true,
		ConnWriteTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer adminRC.Close()

	r := &soakRun{
		t:      t,
		lock:   lockSrv,
		admin:  adminRC,
		prefix: fmt.Sprintf("soak:%d:%d", seed, time.Now().UnixNano()),
		rng:    rand.New(rand.NewPCG(seed, 0x50a6)),
		ev:     soakEvents{pauses: map[int][]soakSpan{}},
		paused: map[int]bool{},
	}
	dir := os.Getenv(envSoakDir)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range soakWorkers {
		path := filepath.Join(dir, fmt.Sprintf("worker%d.log", i))
		r.logs = append(r.logs, path)
		r.workers = append(r.workers, startChild(t, dataSrv.Addr(), "soak",
			strconv.Itoa(i), strconv.FormatUint(seed, 10), lockSrv.Addr(), path, r.prefix))
	}

	begin := time.Now()
	heal := r.all("start")
	for cycle := 1; time.Since(begin) < dur-soakTail || cycle == 1; cycle++ {
		if cycle == 1 {
			r.all("expiry")
		}
		r.calm(heal)
		if cycle%soakQuiesceN == 0 {
			r.quiesce()
			heal = r.all("start")
			r.all("expiry")
			r.calm(heal)
		}
		heal = r.faultPeriod()
	}
	r.calm(heal)
	r.quiesce()
	r.all("final")
	for _, w := range r.workers {
		w.stdin.Close()
		w.wait(t)
	}

	res := checkSoak(t, r.logs, &r.ev, r.storeCounters(t, dataRC), soakOverrunBound(dur))
	var faults strings.Builder
	for i, c := range r.ev.cycles {
		fmt.Fprintf(&faults, "  cycle %d: %s\n", i+1, c.what)
	}
	t.Logf("soak: seed %d, %v, %d cycles\n%s%s", seed, time.Since(begin).Round(time.Second), len(r.ev.cycles), faults.String(), res.table())
	for _, s := range res.notes {
		t.Log("note: " + s)
	}
	const most = 40
	for i, v := range res.violations {
		if i == most {
			t.Errorf("… and %d more violations", len(res.violations)-most)
			break
		}
		t.Error(v)
	}
	if len(res.violations) > 0 {
		t.Logf("soak: %d violations; replay with %s=%d %s=%v", len(res.violations), envSoakSeed, seed, envSoak, dur)
	}
}

// soakConfig reads RELOCK_SOAK and RELOCK_SEED.
func soakConfig(t *testing.T) (time.Duration, uint64) {
	t.Helper()
	dur := soakDefault
	if s := os.Getenv(envSoak); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 30*time.Second {
			t.Fatalf("%s=%q: want a duration of at least 30s", envSoak, s)
		}
		dur = d
	}
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	if s := os.Getenv(envSoakSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", envSoakSeed, s)
		}
		seed = n
	}
	return dur, seed
}

// soakSpan is a time interval in Unix ns.
type soakSpan struct{ from, to int64 }

// soakCycle is one fault period and the calm window after it.
type soakCycle struct {
	what     string // the faults, for messages
	start    int64  // the first fault; 0 for a (re)start of the workers
	heal     int64  // every fault healed, every worker answering
	calmEnd  int64  // the next fault or quiesce
	quiesced bool   // calm window ended by a quiesce
}

// soakEvents is what the test did, for the checker.
type soakEvents struct {
	cycles      []soakCycle
	pauses      map[int][]soakSpan // worker → SIGSTOP..SIGCONT
	restarts    []int64            // lock Redis Stop times: every lock was lost
	probes      []string           // violations found by the quiesce probes
	redisPauses []soakSpan
}

// soakRun drives the soak from the test goroutine.
type soakRun struct {
	t       *testing.T
	lock    *redistest.Server
	admin   rueidis.Client
	prefix  string
	rng     *rand.Rand
	workers []*child
	paused  map[int]bool // workers under SIGSTOP: sent no command
	logs    []string
	ev      soakEvents
}

// send sends a command to worker i and waits for its answer; it returns
// the worker's time of the answer.
func (r *soakRun) send(i int, cmd string) int64 {
	r.t.Helper()
	r.sendAsync(i, cmd)
	return r.answer(i, cmd)
}

func (r *soakRun) sendAsync(i int, cmd string) {
	r.t.Helper()
	if _, err := fmt.Fprintln(r.workers[i].stdin, cmd); err != nil {
		r.t.Fatalf("soak: worker %d: send %q: %v", i, cmd, err)
	}
}

func (r *soakRun) answer(i int, cmd string) int64 {
	r.t.Helper()
	verb := strings.Fields(cmd)[0]
	select {
	case line, ok := <-r.workers[i].lines:
		if !ok {
			r.t.Fatalf("soak: worker %d exited before answering %q", i, cmd)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ok" || f[1] != verb {
			r.t.Fatalf("soak: worker %d answered %q to %q", i, line, cmd)
		}
		at, _ := strconv.ParseInt(f[2], 10, 64)
		return at
	case <-time.After(time.Minute):
		r.t.Fatalf("soak: worker %d did not answer %q within a minute", i, cmd)
	}
	return 0
}

// all sends cmd to every worker and returns when all answered, with the
// latest answer's time.
func (r *soakRun) all(cmd string) int64 {
	r.t.Helper()
	for i := range r.workers {
		r.sendAsync(i, cmd)
	}
	var last int64
	for i := range r.workers {
		last = max(last, r.answer(i, cmd))
	}
	if cmd == "start" {
		r.ev.cycles = append(r.ev.cycles, soakCycle{what: "start", heal: last})
	}
	return max(last, now())
}

// calm lets the workers run without faults for soakCalm after heal.
func (r *soakRun) calm(heal int64) {
	if d := time.Until(time.Unix(0, heal).Add(soakCalm)); d > 0 {
		time.Sleep(d) // the schedule's calm window: nothing to wait for
	}
	r.ev.cycles[len(r.ev.cycles)-1].calmEnd = now()
}

// quiesce stops every worker's goroutines and Client, then probes the
// locks: with nobody running, each must be free and no lock key may
// remain, only fence counters and expiring records.
func (r *soakRun) quiesce() {
	r.t.Helper()
	r.ev.cycles[len(r.ev.cycles)-1].quiesced = true
	r.all("quiesce")
	r.ev.probes = append(r.ev.probes, soakProbe(r.admin)...)
}

// soakProbe takes every soak lock once with TryLock on rc and reports,
// as violations, locks that are not free and keys that remain.
func soakProbe(rc rueidis.Client) []string {
	var bad []string
	c, err := relock.New(rc)
	if err != nil {
		return []string{err.Error()}
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := soakKeys(ctx, rc)
	tries := []struct {
		kind string
		lk   relock.Locker
	}{
		{"mutex", mutex.New(c, soakLockName("mutex"))},
		{"reentrant", reentrant.New(c, soakLockName("reentrant"))},
		{"fair", fair.New(c, soakLockName("fair"))},
		{"rw-read", rwlock.New(c, soakLockName("rw-read")).RLocker()},
		{"rw-write", rwlock.New(c, soakLockName("rw-write")).Locker()},
	}
	for _, try := range tries {
		l, err := try.lk.TryLock(ctx)
		if err != nil {
			bad = append(bad, fmt.Sprintf("ghost: %s not free with every worker quiet (all Clients closed): %v; keys: %s", try.kind, err, before))
			continue
		}
		if err := l.Unlock(); err != nil {
			bad = append(bad, fmt.Sprintf("probe: %s unlock: %v", try.kind, err))
		}
	}
	after := soakKeys(ctx, rc)
	for _, k := range strings.Fields(after) {
		name, pttl, _ := strings.Cut(k, "=")
		switch {
		case !strings.HasSuffix(name, ":fence") && !strings.HasSuffix(name, ":gone"):
			bad = append(bad, fmt.Sprintf("leftover: key %s remains after every lock was taken and released once (before the probe: %s)", k, before))
		case pttl == "-1":
			bad = append(bad, fmt.Sprintf("leftover: key %s has no expiry", name))
		}
	}
	return bad
}

// soakKeys lists the keys of rc's server as "key=pttl[:type:content]".
func soakKeys(ctx context.Context, rc rueidis.Client) string {
	keys, err := rc.Do(ctx, rc.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil {
		return "(KEYS: " + err.Error() + ")"
	}
	var out []string
	for _, k := range keys {
		pttl, _ := rc.Do(ctx, rc.B().Pttl().Key(k).Build()).AsInt64()
		s := fmt.Sprintf("%s=%d", k, pttl)
		if !strings.HasSuffix(k, ":fence") && !strings.HasSuffix(k, ":gone") {
			s += ":" + soakDump(ctx, rc, k)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// soakDump renders a key's value compactly, for messages.
func soakDump(ctx context.Context, rc rueidis.Client, k string) string {
	typ, _ := rc.Do(ctx, rc.B().Type().Key(k).Build()).ToString()
	var v any
	switch typ {
	case "string":
		v, _ = rc.Do(ctx, rc.B().Get().Key(k).Build()).ToString()
	case "hash":
		v, _ = rc.Do(ctx, rc.B().Hgetall().Key(k).Build()).AsStrMap()
	case "list":
		v, _ = rc.Do(ctx, rc.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
	case "zset":
		v, _ = rc.Do(ctx, rc.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()).AsZScores()
	}
	return strings.ReplaceAll(fmt.Sprintf("%s%v", typ, v), " ", ",")
}

// A fault of a fault period: apply starts it, mid runs halfway (may be
// nil), heal ends it.
type soakFault struct {
	what         string
	pausesWorker int // 1 for SIGSTOP, else 0: the order faults apply in
	apply        func()
	mid          func()
	heal         func()
}

// faultPeriod applies one or two faults from the schedule, holds them for
// a seeded duration, heals them all and returns when every worker answers
// again.
func (r *soakRun) faultPeriod() int64 {
	r.t.Helper()
	d := time.Duration(300+r.rng.IntN(int(soakFaultMax/time.Millisecond)-300)) * time.Millisecond
	faults := []soakFault{r.pickFault("")}
	if r.rng.IntN(3) == 0 {
		faults = append(faults, r.pickFault(faults[0].what))
	}
	// A paused worker cannot answer its proxy's commands: pause last,
	// resume first (healing runs in reverse).
	slices.SortStableFunc(faults, func(a, b soakFault) int {
		return cmp.Compare(a.pausesWorker, b.pausesWorker)
	})
	var what []string
	for _, f := range faults {
		what = append(what, f.what)
	}
	c := soakCycle{what: fmt.Sprintf("%s for %v", strings.Join(what, " + "), d), start: now()}
	for _, f := range faults {
		f.apply()
	}
	time.Sleep(d / 2) // the schedule: faults hold for d
	for _, f := range faults {
		if f.mid != nil {
			f.mid()
		}
	}
	time.Sleep(d / 2)
	// Heal in reverse: a worker is resumed before its proxy is told to heal.
	for i := len(faults) - 1; i >= 0; i-- {
		faults[i].heal()
	}
	c.heal = max(r.all("heal"), now())
	r.ev.cycles = append(r.ev.cycles, c)
	return c.heal
}

// pickFault draws one fault from the schedule, other than a second
// change of the lock Redis's state when other is one.
func (r *soakRun) pickFault(other string) soakFault {
	r.t.Helper()
	n := r.rng.IntN(9)
	for strings.HasSuffix(other, "Redis") && (n == 5 || n == 6 || n == 8) {
		n = r.rng.IntN(9)
	}
	target := func() (int, string) { // one worker, or all (-1)
		if r.rng.IntN(2) == 0 {
			return -1, "all"
		}
		i := r.rng.IntN(len(r.workers))
		return i, "worker " + strconv.Itoa(i)
	}
	toProxy := func(i int, cmd string) {
		for j := range r.workers {
			if (i < 0 || i == j) && !r.paused[j] {
				r.send(j, cmd)
			}
		}
	}
	nop := func() {}
	switch n {
	case 0:
		i, who := target()
		lat := time.Duration(20+r.rng.IntN(280)) * time.Millisecond
		return soakFault{what: fmt.Sprintf("latency %v (%s)", lat, who), apply: func() { toProxy(i, "latency "+lat.String()) }, heal: nop}
	case 1:
		i, who := target()
		drop := r.rng.IntN(3) == 0
		f := soakFault{what: "blackhole (" + who + ")", apply: func() { toProxy(i, "blackhole") }, heal: nop}
		if drop {
			f.what += " then drop"
			f.heal = func() { toProxy(i, "drop") }
		}
		return f
	case 2:
		i := r.rng.IntN(len(r.workers))
		conn := r.rng.IntN(3)
		return soakFault{what: fmt.Sprintf("stall conn %d (worker %d)", conn, i), apply: func() { toProxy(i, "stall "+strconv.Itoa(conn)) }, heal: nop}
	case 3:
		i, who := target()
		return soakFault{what: "drop (" + who + ")", apply: func() { toProxy(i, "drop") }, mid: func() { toProxy(i, "drop") }, heal: nop}
	case 4:
		i := r.rng.IntN(len(r.workers))
		f := r.pauseWorker(i)
		f.what = fmt.Sprintf("SIGSTOP worker %d", i)
		return f
	case 5:
		var from int64
		return soakFault{
			what:  "pause Redis",
			apply: func() { from = now(); r.lock.Pause(r.t) },
			heal: func() {
				r.lock.Resume(r.t)
				r.ev.redisPauses = append(r.ev.redisPauses, soakSpan{from, now()})
			},
		}
	case 6:
		return soakFault{
			what:  "restart Redis",
			apply: func() { r.ev.restarts = append(r.ev.restarts, now()); r.lock.Stop(r.t) },
			heal:  func() { r.lock.Start(r.t) },
		}
	case 8:
		// A worker paused across a restart: a release may hand one of its
		// queued waiters the lock before the restart, whose wake-up the
		// paused worker reads only after it, when Redis has forgotten the
		// grant and another worker may hold the lock.
		i := r.rng.IntN(len(r.workers))
		f := r.pauseWorker(i)
		f.what = fmt.Sprintf("SIGSTOP worker %d across a restart of Redis", i)
		f.mid = func() {
			r.ev.restarts = append(r.ev.restarts, now())
			r.lock.Restart(r.t)
		}
		return f
	default:
		kill := func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			// Fails while Redis is paused or stopped by another fault: fine.
			r.admin.Do(ctx, r.admin.B().ClientKill().TypePubsub().Build())
		}
		return soakFault{what: "CLIENT KILL TYPE pubsub", apply: kill, mid: kill, heal: nop}
	}
}

// pauseWorker is the fault that pauses worker i (SIGSTOP) and heals by
// resuming it (SIGCONT).
func (r *soakRun) pauseWorker(i int) soakFault {
	var from int64
	return soakFault{
		pausesWorker: 1,
		apply: func() {
			from = now()
			r.paused[i] = true
			if err := r.workers[i].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				r.t.Fatal(err)
			}
		},
		heal: func() {
			if err := r.workers[i].cmd.Process.Signal(syscall.SIGCONT); err != nil {
				r.t.Fatal(err)
			}
			r.paused[i] = false
			r.ev.pauses[i] = append(r.ev.pauses[i], soakSpan{from, now()})
		},
	}
}

// storeCounters returns the fenced store's counters per lock name.
func (r *soakRun) storeCounters(t *testing.T, rc rueidis.Client) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, kind := range soakKinds {
		name := soakLockName(kind)
		m, err := rc.Do(context.Background(), rc.B().Hgetall().Key(soakResource(r.prefix, name)).Build()).AsIntMap()
		if err != nil {
			t.Fatalf("soak: store counters of %s: %v", name, err)
		}
		out[name] = m
	}
	return out
}

// soakOverrunBound is how long after its ctx's end a Lock may return:
// 50ms in a soak of minutes, run on a machine of its own. The
// short soak (under soakLongRun) runs inside go test ./..., beside other
// packages' tests under the race detector on a 2-core machine, where the
// workers' lag probe does not account for every delay of 50ms; there the
// bound is 250ms — still far below what the bug costs (the abandon made
// synchronous again overran by 300ms–1.1s in a 60s run).
func soakOverrunBound(dur time.Duration) time.Duration {
	if dur < soakLongRun {
		return 250 * time.Millisecond
	}
	return 50 * time.Millisecond
}

// soakLongRun is the length from which a soak is taken to run alone.
const soakLongRun = 5 * time.Minute
