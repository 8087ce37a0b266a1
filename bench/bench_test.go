package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/locktest"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/mutex"
)

// TestMain lets the test binary serve as the benchmark's child processes,
// which re-execute the running binary.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// requireRedisServer fails tb when redis-server is not installed, as the
// main module's tests do, and skips it under -short.
func requireRedisServer(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: the bench needs a redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("redis-server is not installed (apt-get install redis-server), or run go test -short to skip: %v", err)
	}
}

// testRedis starts a redis-server for tb and returns its address.
func testRedis(tb testing.TB) string {
	tb.Helper()
	requireRedisServer(tb)
	srv, err := startRedis(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Stop)
	return srv.Addr
}

// BenchmarkLockUnlock is relock's uncontended Lock+Unlock: one goroutine,
// one Mutex value reused, two round trips per operation.
func BenchmarkLockUnlock(b *testing.B) {
	c, closeAll, err := newRelock(rueidisOption(testRedis(b), false), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll()
	m := mutex.New(c, "bench:lock-unlock")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		lease, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockKinds is the uncontended Lock+Unlock of the mutex and
// Acquire(1)+Unlock of the semaphore, each lock made per call as the bench's
// rows make it (relockKind): compare their allocations with
//
//	go test -run '^$' -bench LockUnlockKinds -benchmem .
func BenchmarkLockUnlockKinds(b *testing.B) {
	c, closeAll, err := newRelock(rueidisOption(testRedis(b), false), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll()
	for _, k := range []struct {
		name string
		lock relockKind
	}{{"mutex", relockMutex}, {"semaphore", relockSemaphore}} {
		b.Run(k.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background()) // one that can end, as the bench's
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := k.lock(ctx, c, "bench:kinds:"+k.name)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Unlock(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTryLockHeld is relock's TryLock of a mutex another owner holds:
// one round trip that fails with ErrNotAcquired.
func BenchmarkTryLockHeld(b *testing.B) {
	c, closeAll, err := newRelock(rueidisOption(testRedis(b), false), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll()
	m := mutex.New(c, "bench:try-held")
	ctx := context.Background()
	held, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer held.Unlock()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.TryLock(ctx); !errors.Is(err, relock.ErrNotAcquired) {
			b.Fatalf("TryLock of a held mutex: %v, want ErrNotAcquired", err)
		}
	}
}

// TestSmoke runs the whole benchmark in smoke mode, as CI does, and checks
// that every row measured something and that the report and plots exist
// and the Redis it started is gone.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("the smoke pass takes about half a minute")
	}
	requireRedisServer(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := run(ctx, config{out: out, smoke: true, command: "go test -run TestSmoke", log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.md", "results.json", "uncontended.png", "distinct.png", "handoffs.png", "fairness.png", "wait.png", "watchdog.png"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Size() == 0 || fi.Size() > 200<<10 {
			t.Errorf("%s: %d bytes", name, fi.Size())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Floor {
		if f.Err != "" || f.N == 0 {
			t.Errorf("floor %s: %d samples, error %q", f.Client, f.N, f.Err)
		}
	}
	for _, u := range res.Uncontended {
		if u.Err != "" || u.N == 0 {
			t.Errorf("uncontended %s: %d samples, error %q", u.ID, u.N, u.Err)
		}
		// A Lock+Unlock blocks on two replies: goroutines run.
		if u.Runs <= 0 {
			t.Errorf("uncontended %s: %.2f goroutine runs/op", u.ID, u.Runs)
		}
		if !u.Server.UsecKnown || u.Server.ScriptsOp == 0 && u.Client == clientRueidis {
			t.Errorf("uncontended %s: Redis µs known %v, %.2f scripts/op", u.ID, u.Server.UsecKnown, u.Server.ScriptsOp)
		}
	}
	if clientFloor(&res, clientRueidisNoPipe) == 0 {
		t.Errorf("no PING floor through %s", clientRueidisNoPipe)
	}
	// The pipelined PING wakes the pipeline's writer and reader goroutines
	// besides the caller; the synchronous one only the caller.
	var runs [2]float64
	for i, name := range []string{floorPipelined, floorSync} {
		for _, f := range res.Floor {
			if f.Client == name {
				runs[i] = f.Runs
			}
		}
	}
	if runs[0] <= runs[1] {
		t.Errorf("PING: %.2f goroutine runs/op pipelined, %.2f synchronous: one path not taken", runs[0], runs[1])
	}
	for _, d := range res.Distinct {
		if d.Err != "" || d.Ops == 0 {
			t.Errorf("distinct %s: %d ops, error %q", d.ID, d.Ops, d.Err)
		}
	}
	if distinct(&res, "relock-nopipe") == nil {
		t.Error("no distinct-keys row for relock on DisableAutoPipelining")
	}
	wantHot := len(librariesIn(inHotKey)) * len(smokePlan().holds)
	if len(res.HotKey) != wantHot {
		t.Errorf("%d hot-key rows, want %d", len(res.HotKey), wantHot)
	}
	for _, h := range res.HotKey {
		if h.Err != "" || h.Acquisitions == 0 || len(h.PerWorker) != 32 {
			t.Errorf("hot key %s hold %v: %d acquisitions by %d waiters, error %q", h.ID, h.Hold, h.Acquisitions, len(h.PerWorker), h.Err)
		}
		if h.ID == "relock-rwlock-mix" && (h.Reads == 0 || h.Writes == 0 || h.Reads+h.Writes != h.Acquisitions) {
			t.Errorf("hot key %s hold %v: %d reads + %d writes of %d acquisitions", h.ID, h.Hold, h.Reads, h.Writes, h.Acquisitions)
		}
		if h.ID == "relock-fair" && h.FIFOViolations < 0 {
			t.Errorf("hot key %s hold %v: FIFO violations not counted", h.ID, h.Hold)
		}
	}
	sp := smokePlan()
	if want := len(librariesIn(inSpread)); len(res.Spread) != want {
		t.Errorf("%d spread rows, want %d", len(res.Spread), want)
	}
	for _, h := range res.Spread {
		if h.Err != "" || h.Acquisitions == 0 || h.Processes != sp.spreadProcs || len(h.PerWorker) != sp.spreadProcs*sp.spreadWorkers {
			t.Errorf("spread %s: %d acquisitions by %d waiters in %d processes, error %q", h.ID, h.Acquisitions, len(h.PerWorker), h.Processes, h.Err)
		}
	}
	for _, h := range res.Spread {
		if w, ok := h.WokenPerHandoff(); !ok || w <= 0 {
			t.Errorf("spread %s: processes woken per handoff not counted (%v, %v)", h.ID, w, ok)
		}
	}
	if want := 2 * len(librariesIn(inSpread)); len(res.Pods) != want {
		t.Errorf("%d pod-shape rows, want %d", len(res.Pods), want)
	}
	for _, id := range waitKinds {
		pod, base := pods(&res, id)
		if pod == nil || base == nil || pod.Processes != sp.podProcs || base.Processes != sp.hotKeyProcs || base.Workers != sp.podProcs ||
			pod.Acquisitions == 0 || base.Acquisitions == 0 || len(pod.PerWorker) != sp.podProcs {
			t.Errorf("pod shape %s: row %+v, baseline %+v", id, pod, base)
			continue
		}
		if _, ok := pod.WokenPerHandoff(); !ok {
			t.Errorf("pod shape %s: processes woken per handoff not counted", id)
		}
	}
	if shapes := sp.ringShapes(); len(res.Ring) != 2*len(shapes) {
		t.Errorf("%d ring rows, want %d (each shape passing plainly and with rejoin)", len(res.Ring), 2*len(shapes))
	}
	for _, g := range res.Ring {
		if g.Err != "" || g.Passes == 0 || g.PassP50 <= 0 {
			t.Errorf("ring %d × %d: %d passes, p50 %v, error %q", g.Processes, g.Workers, g.Passes, g.PassP50, g.Err)
		}
	}
	if len(res.Loss) != len(lossKinds) {
		t.Errorf("%d loss rows, want %d", len(res.Loss), len(lossKinds))
	}
	for _, l := range res.Loss {
		if l.Err != "" || l.N != sp.lossSamples || l.P50 <= 0 || l.P99 < l.P50 || l.Notices < int64(l.N) {
			t.Errorf("loss %s: %d samples, p50 %v, p99 %v, %d notices received, error %q", l.ID, l.N, l.P50, l.P99, l.Notices, l.Err)
		}
	}
	if want := len(librariesIn(inWaiters)) * len(sp.waiters); len(res.Waiters) != want {
		t.Errorf("%d waiters rows, want %d", len(res.Waiters), want)
	}
	for _, h := range res.Waiters {
		if h.Err != "" || h.Acquisitions == 0 || len(h.PerWorker) != h.Workers || h.Server.ScriptsOp < 2 {
			t.Errorf("waiters %s × %d: %d acquisitions by %d waiters, %.2f EVALSHA/handoff, error %q", h.ID, h.Workers, h.Acquisitions, len(h.PerWorker), h.Server.ScriptsOp, h.Err)
		}
	}
	for _, k := range append(res.Watchdog, res.WatchdogScale...) {
		if k.Renews && (k.Err != "" || k.Acquired != k.Leases || k.Lost != 0) {
			t.Errorf("watchdog %s: %d of %d leases, %d lost, error %q", k.ID, k.Acquired, k.Leases, k.Lost, k.Err)
		}
	}
	for _, k := range res.Watchdog {
		if k.Renews && (k.Lease != watchdogTimeout || k.RenewEvery != watchdogTimeout/3) {
			t.Errorf("watchdog %s: lease %v renewed every %v, want the comparison's %v every %v", k.ID, k.Lease, k.RenewEvery, watchdogTimeout, watchdogTimeout/3)
		}
	}
	scale := watchdogScale(&res)
	if len(scale) != len(sp.scaleLeases) {
		t.Errorf("%d rows of relock's watchdog at scale, want %d", len(scale), len(sp.scaleLeases))
	}
	for _, k := range scale {
		if k.Lease != relock.DefaultWatchdogTimeout || k.RenewEvery != relock.DefaultWatchdogTimeout/3 {
			t.Errorf("watchdog relock at scale, %d leases: lease %v renewed every %v, want relock's default %v every %v",
				k.Leases, k.Lease, k.RenewEvery, relock.DefaultWatchdogTimeout, relock.DefaultWatchdogTimeout/3)
		}
		if k.LockUnlockIdle <= 0 || k.LockUnlockHeld <= 0 || k.LockUnlockAfter <= 0 || k.HeapPerLease <= 0 || k.RenewEvery <= 0 {
			t.Errorf("watchdog relock, %d leases: Lock+Unlock/s %.0f before taking them, %.0f held, %.0f after releasing them; %.0f B/lease; renewed every %v",
				k.Leases, k.LockUnlockIdle, k.LockUnlockHeld, k.LockUnlockAfter, k.HeapPerLease, k.RenewEvery)
		}
	}
	if rp := res.Replica; rp == nil || rp.Err != "" || rp.Floor.N == 0 || len(rp.Uncontended) != len(replicaLibraries) {
		t.Errorf("replica scenario: %+v", rp)
	} else {
		for _, u := range rp.Uncontended {
			if u.Err != "" || u.N == 0 {
				t.Errorf("replica %s: %d samples, error %q", u.ID, u.N, u.Err)
			}
		}
		// WAIT, at least, is one more command per grant on the master.
		if plain, ack := rp.Uncontended[0], rp.Uncontended[1]; ack.Server.PerOp < plain.Server.PerOp+1 {
			t.Errorf("replica: %s runs %.1f commands/op on the master, %s %.1f: no WAIT?", ack.ID, ack.Server.PerOp, plain.ID, plain.Server.PerOp)
		}
	}
	for _, tg := range res.Targets {
		if !tg.Known {
			t.Errorf("target %q not measured", tg.Name)
		}
	}
	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "| # | target | wanted | measured | | previous |", "goroutine runs/op", "client I/O", "FIFO violations",
		"### Hot key, zero hold, 32 waiters in 16 processes of 2", "processes of 1 waiter (the pod shape)", "processes woken/handoff", "## 6b. Loss notice", "| previous run |", "## 5b. Waiters at scale", "EVALSHA/handoff", "### relock's watchdog at scale", "I/O path of the PING", floorPipelined, "lease (renewed every)",
		"## 6. Watchdog cost", "## 8. Replica acknowledgement", "Smoke run", "handoffs.png"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if n := strings.Count(string(report), "| PASS |") + strings.Count(string(report), "| **MISS** |"); n < 2*len(res.Targets) {
		t.Errorf("report.md gives %d verdicts for %d targets (each in two tables)", n, len(res.Targets))
	}
	if err := ping(res.Meta.RedisAddr); err == nil {
		t.Errorf("the redis-server at %s still answers after the run", res.Meta.RedisAddr)
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		xs   []int64
		want float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25},
		{[]int64{0, 0}, 0},
		{[]int64{1, 3}, 16.0 / 20},
	} {
		if got := jain(c.xs); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i + 1)
	}
	for p, want := range map[float64]time.Duration{50: 50, 99: 99, 100: 100, 1: 1} {
		if got := percentile(s, p); got != want {
			t.Errorf("percentile(1…100, %v) = %v, want %v", p, got, want)
		}
	}
}

// TestMergeHotKeySwitches checks that switches count changes of holder in
// grant order, across processes.
func TestMergeHotKeySwitches(t *testing.T) {
	parts := []*hotKeyPart{
		{PerWorker: []int64{2, 1}, Stamps: []int64{10, 20, 30}, Workers: []int32{0, 0, 1}},
		{PerWorker: []int64{1}, Stamps: []int64{15}, Workers: []int32{2}},
	}
	row := HotKeyRow{Seconds: 1}
	mergeHotKey(&row, parts, false, false)
	// Grant order: 0 (10), 2 (15), 0 (20), 1 (30): three switches, the
	// last within the first process.
	if row.Acquisitions != 4 || row.SwitchesSec != 3 {
		t.Errorf("acquisitions %d, switches/s %v; want 4 and 3", row.Acquisitions, row.SwitchesSec)
	}
	if row.InProcess == nil || math.Abs(*row.InProcess-1.0/3) > 1e-9 {
		t.Errorf("in-process share %v, want 1/3", row.InProcess)
	}
	shared := HotKeyRow{Seconds: 1}
	mergeHotKey(&shared, parts, true, false)
	if shared.SwitchesSec != -1 || shared.InProcess != nil {
		t.Errorf("switches/s %v, in-process %v with overlapping holds, want -1 and nil (not counted)", shared.SwitchesSec, shared.InProcess)
	}
	crossing := HotKeyRow{Seconds: 1}
	mergeHotKey(&crossing, []*hotKeyPart{
		{PerWorker: []int64{2}, Stamps: []int64{10, 30}, Workers: []int32{0, 0}},
		{PerWorker: []int64{1}, Stamps: []int64{20}, Workers: []int32{1}},
	}, false, false)
	if crossing.InProcess == nil || *crossing.InProcess != 0 {
		t.Errorf("in-process share %v when every switch crosses, want 0 (counted)", crossing.InProcess)
	}
}

// TestMergeHotKeyOrderedByToken checks that an ordered row's FIFO
// violations follow its grants' tokens, not the order its Lock calls
// returned in: with several grants in flight, a later grant's Lock may
// return first (no violation), and a grant that overtook may return last
// (a violation).
func TestMergeHotKeyOrderedByToken(t *testing.T) {
	const ms = int64(time.Millisecond)
	// Waiter 0 began 10 ms before waiter 1.
	part := func(returned, tokens []int64) []*hotKeyPart {
		return []*hotKeyPart{{PerWorker: []int64{1, 1}, Workers: []int32{0, 1}, Began: []int64{0, 10 * ms}, Stamps: returned, Tokens: tokens}}
	}
	for _, c := range []struct {
		name             string
		returned, tokens []int64
		byTime, byTokens int64
	}{
		{"granted in order, returned out of order", []int64{30 * ms, 20 * ms}, []int64{100, 200}, 1, 0},
		{"overtaken, returned in order", []int64{20 * ms, 30 * ms}, []int64{200, 100}, 0, 1},
	} {
		row := HotKeyRow{Seconds: 1}
		mergeHotKey(&row, part(c.returned, c.tokens), true, true)
		if row.FIFOViolations != c.byTokens {
			t.Errorf("%s: %d FIFO violations, want %d (by token)", c.name, row.FIFOViolations, c.byTokens)
		}
		// A row whose holds do not overlap counts by the time Lock returned.
		row = HotKeyRow{Seconds: 1}
		mergeHotKey(&row, part(c.returned, c.tokens), false, false)
		if row.FIFOViolations != c.byTime {
			t.Errorf("%s, not ordered: %d FIFO violations, want %d (by return)", c.name, row.FIFOViolations, c.byTime)
		}
	}
	// Tokens missing from a part: the order is unknown, nothing is counted.
	row := HotKeyRow{Seconds: 1}
	mergeHotKey(&row, part([]int64{20 * ms, 30 * ms}, nil), true, true)
	if row.FIFOViolations != -1 {
		t.Errorf("without tokens: %d FIFO violations, want -1 (not counted)", row.FIFOViolations)
	}
}

// TestArrival checks that the semaphore row's hot-key waits are dated by
// when their first attempt ran, on the server's clock: a wait granted at
// once by its token, a wait that queued by the clock its attempt's reply
// gives, before the grant that a release later handed it.
func TestArrival(t *testing.T) {
	addr := testRedis(t)
	lib, err := libraryByID("relock-semaphore")
	if err != nil {
		t.Fatal(err)
	}
	lk, closeAll, err := lib.openHot(addr, newSentCommands())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	tl, ok := lk.(tokenLocker)
	if !ok {
		t.Fatalf("the semaphore row's locker %T is no tokenLocker", lk)
	}
	rc, err := rueidis.NewClient(rueidisOption(addr, false))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	serverNs := func() int64 {
		t.Helper()
		v, err := rc.Do(ctx, rc.B().Time().Build()).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		return v[0]*int64(time.Second) + v[1]*int64(time.Microsecond)
	}
	const key = "arrival"
	var unlocks []func() error
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	for i := range semaphoreSize {
		var arrival atomic.Int64
		u, token, err := tl.LockToken(withArrival(ctx, &arrival), key)
		if err != nil {
			t.Fatal(err)
		}
		unlocks = append(unlocks, u)
		if i == 0 && arrival.Load() != token*int64(time.Microsecond) {
			t.Errorf("granted at once: arrival %d, want the token %d in ns", arrival.Load(), token)
		}
	}
	// Every permit held: a waiter queues, and a release hands it a permit.
	var arrival atomic.Int64
	before := serverNs() / int64(time.Millisecond) * int64(time.Millisecond) // the reply's clock is in ms
	type grant struct {
		unlock func() error
		token  int64
		err    error
	}
	granted := make(chan grant, 1)
	go func() {
		u, token, err := tl.LockToken(withArrival(ctx, &arrival), key)
		granted <- grant{u, token, err}
	}()
	queue := luascripts.NewKeys(relock.DefaultKeyPrefix, key).Queue
	locktest.Eventually(t, "the waiter queued", func() bool {
		return locktest.QueueLen(ctx, rc, queue) == 1
	})
	queued := serverNs()
	if err := unlocks[0](); err != nil {
		t.Fatal(err)
	}
	unlocks = unlocks[1:]
	g := <-granted
	if g.err != nil {
		t.Fatal(g.err)
	}
	unlocks = append(unlocks, g.unlock)
	if at := arrival.Load(); at < before || at > queued || at >= g.token*int64(time.Microsecond) {
		t.Errorf("queued, then handed a permit with token %d: arrival %d, want when it queued, in [%d, %d]", g.token, at, before, queued)
	}
}

// testLog writes the benchmark's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestOvertakes checks the FIFO count: a grant overtakes only a waiter that
// began at least the tolerance earlier and was still waiting.
func TestOvertakes(t *testing.T) {
	const ms = int64(time.Millisecond)
	open := int64(math.MaxInt64)
	for _, c := range []struct {
		name  string
		spans []waitSpan
		want  int64
	}{
		{"in order", []waitSpan{{0, 10 * ms}, {1 * ms, 20 * ms}, {8 * ms, 30 * ms}}, 0},
		{"overtaken", []waitSpan{{0, 30 * ms}, {10 * ms, 20 * ms}}, 1},
		{"within the tolerance", []waitSpan{{0, 30 * ms}, {4 * ms, 20 * ms}}, 0},
		{"already granted", []waitSpan{{0, 10 * ms}, {20 * ms, 30 * ms}}, 0},
		{"behind an open wait", []waitSpan{{0, open}, {10 * ms, 20 * ms}, {15 * ms, 25 * ms}}, 2},
		{"one grant, two overtaken", []waitSpan{{0, 40 * ms}, {1 * ms, 50 * ms}, {10 * ms, 20 * ms}}, 1},
	} {
		if got := overtakes(c.spans, 5*time.Millisecond); got != c.want {
			t.Errorf("%s: %d overtakes, want %d", c.name, got, c.want)
		}
	}
}

// TestCostCountsScriptsOnce checks that Redis time counts a script's
// commands once, in its EVALSHA, and the commands a client sent itself.
func TestCostCountsScriptsOnce(t *testing.T) {
	d := serverDelta{
		commands: 6,
		calls:    map[string]int64{"evalsha": 2, "get": 2, "set": 2},
		usec:     map[string]int64{"evalsha": 30, "get": 4, "set": 6},
	}
	// The scripts ran GET and SET: only EVALSHA's time counts.
	if c := d.cost(2, map[string]int64{"evalsha": 2}); c.Usec != 30 || c.Scripts != 2 || c.ScriptsOp != 1 {
		t.Errorf("scripts only: usec %d, scripts %d (%.1f/op); want 30, 2 (1/op)", c.Usec, c.Scripts, c.ScriptsOp)
	}
	// The client sent one of the two SETs itself: half of SET's time counts.
	if c := d.cost(2, map[string]int64{"evalsha": 2, "set": 1}); c.Usec != 33 {
		t.Errorf("one SET sent: usec %d, want 33", c.Usec)
	}
	if c := d.cost(2, nil); c.UsecKnown {
		t.Error("usec known without the client's counts")
	}
}

// TestSentCommands checks the count by name, as INFO spells it.
func TestSentCommands(t *testing.T) {
	s := newSentCommands()
	before := s.snapshot()
	s.add("EVALSHA")
	s.add("evalsha")
	s.add("SET")
	got := sentSince(before, s.snapshot())
	if got["evalsha"] != 2 || got["set"] != 1 || len(got) != 2 {
		t.Errorf("sent %v, want evalsha 2, set 1", got)
	}
	var none *sentCommands
	none.add("GET")
	if none.snapshot() != nil {
		t.Error("a nil sentCommands counted")
	}
}

// TestHotShape checks that a shape's processes split its waiters.
func TestHotShape(t *testing.T) {
	s := hotShape{procs: 4, waiters: 10}
	total := 0
	for i := range s.procs {
		if got := s.firstID(i); got != total {
			t.Errorf("process %d: first waiter %d, want %d", i, got, total)
		}
		total += s.workers(i)
	}
	if total != 10 || s.workers(0) != 3 || s.workers(3) != 2 {
		t.Errorf("10 waiters in 4 processes: %d in all, %d in the first, %d in the last", total, s.workers(0), s.workers(3))
	}
}

// TestTargetTolerances checks how targets 1 and 2 are judged: goroutine
// runs within the sampling tolerance pass, and the DisableAutoPipelining
// row is compared with the pipelined PING, not the synchronous one.
func TestTargetTolerances(t *testing.T) {
	find := func(ts []Target, lib, short string) Target {
		t.Helper()
		for _, tg := range ts {
			if tg.Lib == lib && strings.HasPrefix(tg.Short, short) {
				return tg
			}
		}
		t.Fatalf("no target %q of %s", short, lib)
		return Target{}
	}
	res := func(runs float64) *Results {
		return &Results{
			Floor: []FloorRow{{Client: floorPipelined, N: 1, P50: 60 * time.Microsecond}, {Client: floorSync, N: 1, P50: 40 * time.Microsecond}},
			Uncontended: []LatencyRow{
				{Lib: Lib{ID: "relock"}, N: 1, P50: time.Millisecond, Runs: runs},
				{Lib: Lib{ID: "relock-scripts"}, N: 1, P50: time.Millisecond, Runs: 2},
				{Lib: Lib{ID: "relock-nopipe"}, N: 1, P50: 90 * time.Microsecond},
			},
		}
	}
	for _, c := range []struct {
		runs float64
		pass bool
	}{{2, true}, {2.08, true}, {2.12, false}} {
		tg := find(evaluate(res(c.runs)), "relock", "goroutine runs")
		if tg.Pass != c.pass || !strings.Contains(tg.Want, "±5%") {
			t.Errorf("runs %.2f vs 2: pass %v (want %v), wanted %q", c.runs, tg.Pass, c.pass, tg.Want)
		}
	}
	// 90 µs is 1.5× the pipelined PING, 2.25× the synchronous one.
	if tg := find(evaluate(res(2)), "relock-nopipe", "DisableAutoPipelining"); !tg.Pass || tg.Ratio != 1.5 {
		t.Errorf("DisableAutoPipelining: pass %v at %.2f×, want a pass at 1.50× the pipelined PING", tg.Pass, tg.Ratio)
	}
}
