package main

import (
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
