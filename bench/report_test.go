package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportPeers checks the summary against the peers that the README
// copies: relock's figure ÷ each peer's, the tuned row in brackets, and a
// dash where a peer has no such row.
func TestReportPeers(t *testing.T) {
	lib := func(id string) Lib { return Lib{ID: id} }
	res := &Results{
		Uncontended: []LatencyRow{
			{Lib: lib("relock"), N: 1, P50: 200 * time.Microsecond},
			{Lib: lib("bsm"), N: 1, P50: 100 * time.Microsecond},
			{Lib: lib("redsync"), N: 1, P50: 400 * time.Microsecond},
			{Lib: lib("rueidislock"), N: 1, P50: 800 * time.Microsecond},
			{Lib: lib("rueidislock-1key"), N: 1, P50: 200 * time.Microsecond},
		},
		Distinct: []ThroughputRow{
			{Lib: lib("relock"), Ops: 1, OpsPerSec: 30000},
			{Lib: lib("bsm"), Ops: 1, OpsPerSec: 10000},
		},
		Watchdog: []WatchdogRow{
			{Lib: lib("relock"), Renews: true, Acquired: 10000, Held: WindowStats{RoundTripSec: 21}, Idle: WindowStats{RoundTripSec: 1}},
			{Lib: lib("rueidislock"), Renews: true, Acquired: 10000, Held: WindowStats{RoundTripSec: 20001}, Idle: WindowStats{RoundTripSec: 1}},
		},
	}
	var w mdWriter
	peersSection(&w, res)
	got := w.String()
	for _, want := range []string{
		"| | relock | ÷ bsm/redislock | ÷ go-redsync/redsync | ÷ rueidislock |",
		"| uncontended Lock+Unlock, p50 (lower is better) | 200 µs | 2.00× | 0.50× | 0.25× (1.00×) |",
		"| 64 goroutines on distinct keys, ops/s | 30,000 | 3.00× | – | – |",
		"| 10,000 leases kept alive (3 s lease): round trips/s (lower is better) | 20 | – | – | 1/1,000 |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the summary lacks the line\n%s\nin\n%s", want, got)
		}
	}
	// No hot-key or redlock rows were measured: their lines are left out,
	// not shown with zeros.
	if strings.Contains(got, "hot key") || strings.Contains(got, "redlock over") {
		t.Errorf("the summary shows rows that were not measured:\n%s", got)
	}
}

// TestReportPrevious checks that the previous run's figures stand beside
// this run's: in the many-processes table, the ratio to the baseline with
// the handoffs/s behind it, the wait p99's, the commands per handoff; in
// the targets tables, each target evaluated on the previous run's rows.
func TestReportPrevious(t *testing.T) {
	lib := func(id string) Lib { return Lib{ID: id, Name: id} }
	rows := func(main, spread float64, p99Main, p99Spread time.Duration, cmds float64) *Results {
		return &Results{
			HotKey: []HotKeyRow{{Lib: lib("relock"), Processes: 2, Workers: 32, Seconds: 1, Acquisitions: 1, HandoffsSec: main, WaitP99: p99Main}},
			Spread: []HotKeyRow{{Lib: lib("relock"), Processes: 16, Workers: 32, Seconds: 1, Acquisitions: 1, HandoffsSec: spread, WaitP99: p99Spread,
				Server: ServerCost{PerOp: cmds}}},
		}
	}
	res := rows(3000, 2700, 10*time.Millisecond, 15*time.Millisecond, 14.1)
	res.Previous = rows(3194, 983, 16*time.Millisecond, 48*time.Millisecond, 21.2)
	res.Targets = evaluate(res)

	var w mdWriter
	spreadSection(&w, res)
	line := ""
	for l := range strings.Lines(w.String()) {
		if strings.HasPrefix(l, "| relock |") {
			line = l
		}
	}
	for _, want := range []string{"| 2,700 | 0.90× | 0.31× (983) |", "| 15 ms | 1.50× | 3.00× (48 ms) |", "| 14.1 | 21.2 |"} {
		if !strings.Contains(line, want) {
			t.Errorf("the 16 × 2 row lacks %q:\n%s", want, line)
		}
	}

	w = mdWriter{}
	targetsSection(&w, res)
	for _, want := range []string{
		"| 8 | mutex: handoffs/s, 16 processes × 2 ÷ 2 × 16 | ≥ 0.8× | 0.90× | PASS | 0.31× |",
		"| 8 | mutex: wait p99, 16 processes × 2 ÷ 2 × 16 | ≤ 2× | 1.50× | PASS | 3.00× |",
		"| 8 | mutex: Redis commands/handoff, 16 processes × 2 | ≤ 15 | 14.1 | PASS | 21.2 |",
		// Neither run has pod-shape rows.
		"| 8 | mutex: handoffs/s, 64 processes × 1 ÷ 2 × 32 | ≥ 0.7× | – | not measured | – |",
	} {
		if !strings.Contains(w.String(), want+"\n") {
			t.Errorf("the targets lack the line\n%s\nin\n%s", want, w.String())
		}
	}
}

// TestPreviousRun checks which results.json a run keeps as the previous
// one: that of a run of its kind (smoke or not), trimmed of what the
// report does not compare.
func TestPreviousRun(t *testing.T) {
	r := &runner{log: io.Discard}
	dir := t.TempDir()
	if p := r.previousRun(dir, false); p != nil {
		t.Errorf("an empty directory gave a previous run: %+v", p.Meta)
	}
	old := Results{
		Meta:     Meta{Command: "cd bench && go run . -out results"},
		Spread:   []HotKeyRow{{Lib: Lib{ID: "relock"}, Processes: 16, Workers: 32, PerWorker: make([]int64, 32)}},
		Profiles: []ProfileSummary{{Scenario: "spread"}},
		Previous: &Results{Meta: Meta{Command: "older"}},
	}
	if err := writeJSON(filepath.Join(dir, "results.json"), old); err != nil {
		t.Fatal(err)
	}
	if p := r.previousRun(dir, true); p != nil {
		t.Error("a smoke run compared with a full run's results")
	}
	p := r.previousRun(dir, false)
	if p == nil {
		t.Fatal("no previous run")
	}
	if p.Meta.Command != old.Meta.Command || len(p.Spread) != 1 || p.Spread[0].Processes != 16 {
		t.Errorf("previous run %+v, want the one written", p)
	}
	if p.Previous != nil || p.Profiles != nil || p.Spread[0].PerWorker != nil {
		t.Errorf("previous run not trimmed: previous %v, profiles %v, per worker %v", p.Previous, p.Profiles, p.Spread[0].PerWorker)
	}
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// TestReportRing checks that the ring's rows are divided by the ring with
// as many workers in 2 processes, and stand beside relock's mutex's ratio
// in the same shape.
func TestReportRing(t *testing.T) {
	lib := Lib{ID: "relock", Name: "relock"}
	res := &Results{
		HotKey: []HotKeyRow{{Lib: lib, Processes: 2, Workers: 32, Seconds: 1, Acquisitions: 1, HandoffsSec: 3000}},
		Spread: []HotKeyRow{{Lib: lib, Processes: 16, Workers: 32, Seconds: 1, Acquisitions: 1, HandoffsSec: 1800}},
		Ring: []RingRow{
			{Processes: 2, Workers: 32, PassesSec: 14000},
			{Processes: 16, Workers: 32, PassesSec: 7000},
			{Processes: 2, Workers: 64, PassesSec: 12000},
			{Processes: 64, Workers: 64, PassesSec: 3000},
			{Processes: 2, Workers: 32, PassesSec: 10000, Rejoin: true},
			{Processes: 16, Workers: 32, PassesSec: 6000, Rejoin: true},
		},
	}
	var w mdWriter
	ringSection(&w, res)
	for _, want := range []string{
		"| 2 × 16 | `PUBLISH` | 14,000 | – |",
		"| 16 × 2 | `PUBLISH` | 7,000 | 0.50× |",
		"| 64 × 1 | `PUBLISH` | 3,000 | 0.25× |",
		"| 16 × 2 | `PUBLISH` + rejoin (`PING`) | 6,000 | 0.60× |",
	} {
		if !strings.Contains(w.String(), want) {
			t.Errorf("the ring table lacks %q:\n%s", want, w.String())
		}
	}
	for l := range strings.Lines(w.String()) {
		if strings.HasPrefix(l, "| 16 × 2 |") && !strings.HasSuffix(l, "| 0.60× |\n") {
			t.Errorf("the 16 × 2 row lacks relock's 0.60×: %s", l)
		}
		if strings.HasPrefix(l, "| 64 × 1 |") && !strings.HasSuffix(l, "| – |\n") {
			t.Errorf("the 64 × 1 row has a relock ratio without pod-shape rows: %s", l)
		}
	}
}
