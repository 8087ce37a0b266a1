package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relockgo/relock"
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
	c, closeAll, err := newRelock(testRedis(b), nil)
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

// BenchmarkTryLockHeld is relock's TryLock of a mutex another owner holds:
// one round trip that fails with ErrNotAcquired.
func BenchmarkTryLockHeld(b *testing.B) {
	c, closeAll, err := newRelock(testRedis(b), nil)
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
	}
	for _, d := range res.Distinct {
		if d.Err != "" || d.Ops == 0 {
			t.Errorf("distinct %s: %d ops, error %q", d.ID, d.Ops, d.Err)
		}
	}
	wantHot := len(librariesIn(inHotKey)) * len(smokePlan().holds)
	if len(res.HotKey) != wantHot {
		t.Errorf("%d hot-key rows, want %d", len(res.HotKey), wantHot)
	}
	for _, h := range res.HotKey {
		if h.Err != "" || h.Acquisitions == 0 || len(h.PerWorker) != 32 {
			t.Errorf("hot key %s hold %v: %d acquisitions by %d waiters, error %q", h.ID, h.Hold, h.Acquisitions, len(h.PerWorker), h.Err)
		}
	}
	for _, k := range res.Watchdog {
		if k.Renews && (k.Err != "" || k.Acquired != k.Leases || k.Lost != 0) {
			t.Errorf("watchdog %s: %d of %d leases, %d lost, error %q", k.ID, k.Acquired, k.Leases, k.Lost, k.Err)
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
	for _, want := range []string{"## Targets", "## 6. Watchdog cost", "## 8. Replica acknowledgement", "Smoke run", "handoffs.png"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q", want)
		}
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
	mergeHotKey(&row, parts, false)
	// Grant order: 0 (10), 2 (15), 0 (20), 1 (30): three switches.
	if row.Acquisitions != 4 || row.SwitchesSec != 3 {
		t.Errorf("acquisitions %d, switches/s %v; want 4 and 3", row.Acquisitions, row.SwitchesSec)
	}
	shared := HotKeyRow{Seconds: 1}
	mergeHotKey(&shared, parts, true)
	if shared.SwitchesSec != -1 {
		t.Errorf("switches/s %v with overlapping holds, want -1 (not counted)", shared.SwitchesSec)
	}
}

// testLog writes the benchmark's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
