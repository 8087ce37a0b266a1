package main

import (
	"fmt"
	"time"
)

// The targets for relock's plain mutex.
const (
	targetUncontended  = 2.2  // uncontended p50 ≤ 2.2× PING p50
	targetVsRueidis    = 1.0  // distinct keys ≥ rueidislock
	targetVsRedsync    = 3.0  // distinct keys ≥ 3× redsync
	targetVsBsm        = 2.0  // distinct keys ≥ 2× bsm
	targetCeiling      = 0.5  // hot-key handoffs ≥ 50% of 1/(2·RTT)
	targetVsRedsyncHot = 10.0 // hot-key handoffs ≥ 10× redsync's default
)

// rtt returns the round-trip floor: the PING p50 through rueidis.
func rtt(res *Results) time.Duration {
	for _, f := range res.Floor {
		if f.Client == "rueidis" && f.Err == "" {
			return f.P50
		}
	}
	return 0
}

// clientFloor returns the PING p50 through client.
func clientFloor(res *Results, client string) time.Duration {
	for _, f := range res.Floor {
		if f.Client == client && f.Err == "" {
			return f.P50
		}
	}
	return 0
}

// evaluate checks the targets against the results.
func evaluate(res *Results) []Target {
	var ts []Target
	floor := rtt(res)

	t := Target{Name: "uncontended Lock+Unlock p50", Want: fmt.Sprintf("≤ %.1f× PING p50", targetUncontended), Scenario: "uncontended"}
	if u := uncontended(res, "relock"); u != nil && floor > 0 {
		t.Known = true
		t.Ratio = float64(u.P50) / float64(floor)
		t.Pass = t.Ratio <= targetUncontended
		t.Got = fmt.Sprintf("%.2f× (%s vs PING %s)", t.Ratio, fmtDur(u.P50), fmtDur(floor))
	}
	ts = append(ts, t)

	for _, peer := range []struct {
		id, name string
		want     float64
	}{{"rueidislock", "rueidislock (default)", targetVsRueidis}, {"redsync", "redsync (default)", targetVsRedsync}, {"bsm", "bsm/redislock (default)", targetVsBsm}} {
		t := Target{Name: "64 goroutines, distinct keys: ops/s vs " + peer.name, Want: fmt.Sprintf("≥ %.0f×", peer.want), Scenario: "distinct"}
		rl, p := distinct(res, "relock"), distinct(res, peer.id)
		if rl != nil && p != nil && p.OpsPerSec > 0 {
			t.Known = true
			t.Ratio = rl.OpsPerSec / p.OpsPerSec
			t.Pass = t.Ratio >= peer.want
			t.Got = fmt.Sprintf("%.2f× (%s vs %s ops/s)", t.Ratio, fmtRate(rl.OpsPerSec), fmtRate(p.OpsPerSec))
		}
		ts = append(ts, t)
	}

	t = Target{Name: "hot key, zero hold: handoffs/s vs the ceiling 1/(2·RTT)", Want: fmt.Sprintf("≥ %.0f%%", 100*targetCeiling), Scenario: "hotkey"}
	if h := hotKey(res, "relock", 0); h != nil && floor > 0 {
		ceiling := 1 / (2 * floor.Seconds())
		t.Known = true
		t.Ratio = h.HandoffsSec / ceiling
		t.Pass = t.Ratio >= targetCeiling
		t.Got = fmt.Sprintf("%.0f%% (%s of %s handoffs/s)", 100*t.Ratio, fmtRate(h.HandoffsSec), fmtRate(ceiling))
	}
	ts = append(ts, t)

	for _, hold := range []time.Duration{0, time.Millisecond} {
		t := Target{Name: fmt.Sprintf("hot key, %s hold: handoffs/s vs redsync (default)", fmtHold(hold)), Want: fmt.Sprintf("≥ %.0f×", targetVsRedsyncHot), Scenario: "hotkey"}
		rl, rs := hotKey(res, "relock", hold), hotKey(res, "redsync", hold)
		if rl != nil && rs != nil && rs.HandoffsSec > 0 {
			t.Known = true
			t.Ratio = rl.HandoffsSec / rs.HandoffsSec
			t.Pass = t.Ratio >= targetVsRedsyncHot
			t.Got = fmt.Sprintf("%.1f× (%s vs %s handoffs/s)", t.Ratio, fmtRate(rl.HandoffsSec), fmtRate(rs.HandoffsSec))
		}
		ts = append(ts, t)
	}
	return ts
}

func uncontended(res *Results, id string) *LatencyRow {
	for i := range res.Uncontended {
		if r := &res.Uncontended[i]; r.ID == id && r.Err == "" && r.N > 0 {
			return r
		}
	}
	return nil
}

func distinct(res *Results, id string) *ThroughputRow {
	for i := range res.Distinct {
		if r := &res.Distinct[i]; r.ID == id && r.Ops > 0 {
			return r
		}
	}
	return nil
}

func hotKey(res *Results, id string, hold time.Duration) *HotKeyRow {
	for i := range res.HotKey {
		if r := &res.HotKey[i]; r.ID == id && r.Hold == hold && r.Err == "" {
			return r
		}
	}
	return nil
}
