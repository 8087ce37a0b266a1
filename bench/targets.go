package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/relockgo/relock"
)

// relock's performance targets, numbered by group (Target.Issue): the
// number the report's Targets table shows.
const (
	targetRunsVsScripts    = 1.0  // 1: goroutine runs per Lock+Unlock ≤ the scripts alone's
	runsTolerance          = 0.05 // 1: judged within this share, the runs being sampled (schedSampling)
	targetAllocs           = 25.0 // 1: allocations per Lock+Unlock
	targetP50VsScripts     = 1.15 // 2: uncontended p50 ≤ 1.15× the scripts alone's
	targetNoPipeVsPing     = 1.6  // 2: DisableAutoPipelining p50 ≤ 1.6× rueidis PING p50, pipelined
	targetVsBsm            = 2.0  // 3: distinct keys ≥ 2× bsm/redislock
	targetVsRedsync        = 2.5  // 3: distinct keys ≥ 2.5× redsync
	targetVsRueidisTuned   = 1.0  // 3: distinct keys ≥ rueidislock, KeyMajority 1
	targetFairVsMutex      = 1.0  // 4: fair handoffs/s ≥ the mutex's, zero hold
	targetFairWaitMax      = 3.0  // 4: fair wait max ≤ 3× its wait p99
	targetSpreadVsMain     = 0.8  // 8: 16 processes × 2 ≥ 0.8× 2 processes × 16
	targetSpreadWaitP99    = 2.0  // 8: wait p99 at 16 processes × 2 ≤ 2× at 2 × 16
	targetSpreadCommands   = 15.0 // 8: Redis commands per handoff, 16 processes × 2
	targetPodsVsBase       = 0.7  // 8: 64 processes × 1 ≥ 0.7× 2 processes × 32
	targetWoken            = 2.0  // 8: processes woken per handoff at 16 × 2 and 64 × 1
	targetLossP99          = 100 * time.Millisecond
	targetRedisUsec        = 20.0 // 9: Redis µs per uncontended Lock+Unlock
	targetRedisUsecVsBsm   = 2.0  // 9: ≤ 2× bsm/redislock's Redis µs
	targetFastestVsBsm     = 1.0  // 9: the fastest setup's p50 ≤ bsm/redislock's
	targetSemaphoreP50     = 1.1  // 10: semaphore Acquire(1)+Unlock p50 ≤ 1.1× the mutex's
	targetSemaphoreGrants  = 3.0  // 10: semaphore grants/s ≥ 3× the mutex's handoffs/s
	targetLossSamples      = 100  // 8: loss notice latency over at least this many force unlocks
	targetRWCommands       = 20.0 // 5: Redis commands per handoff, rwlock 90/10
	targetHeldVsNone       = 0.8  // 6: Lock+Unlock/s with 100k held ≥ 0.8× with none
	targetTake             = 10 * time.Second
	targetRenewTrips       = 1.0 // 6: round trips per 100 renewals due
	targetEvalshaFanOut    = 2.0 // 7: EVALSHA/handoff at 1,000 waiters ≤ 2× at 10
	targetFanOutBase       = 10  // 7: the waiters the fan-out is compared with
	targetFanOutMaxWaiters = 1000
)

// The kinds whose spread and waiters rows the targets check.
var waitKinds = []string{"relock", "relock-reentrant", "relock-fair"}

// rtt returns the round-trip floor: the PING p50 through rueidis's
// pipeline goroutines, the path of the default rueidis client's rows.
func rtt(res *Results) time.Duration {
	return clientFloor(res, clientRueidis)
}

// clientFloor returns the PING p50 of client's floor row (see floorOf).
func clientFloor(res *Results, client string) time.Duration {
	if p := floorP50(res, floorOf(client)); p > 0 {
		return p
	}
	// Results written before the floor rows named their path.
	return floorP50(res, client)
}

// floorP50 returns the PING p50 of the floor row named name.
func floorP50(res *Results, name string) time.Duration {
	for _, f := range res.Floor {
		if f.Client == name && f.Err == "" {
			return f.P50
		}
	}
	return 0
}

// target starts a Target of group n.
func target(n int, scenario, lib, name, short, want string) Target {
	return Target{Issue: n, Scenario: scenario, Lib: lib, Name: name, Short: short, Want: want}
}

// set records the measured ratio and verdict, with brief the figure the
// copyable table shows and got the figures behind it.
func (t *Target) set(ratio float64, pass bool, brief, got string, args ...any) {
	t.Known, t.Ratio, t.Pass, t.Brief, t.Got = true, ratio, pass, brief, fmt.Sprintf(got, args...)
}

// times renders a ratio for the copyable table.
func times(r float64) string { return fmt.Sprintf("%.2f×", r) }

// evaluate checks the targets against the results.
func evaluate(res *Results) []Target {
	var ts []Target
	u, alone, np := uncontended(res, "relock"), uncontended(res, "relock-scripts"), uncontended(res, "relock-nopipe")

	// 1. No goroutine wake-ups on the uncontended path.
	t := target(1, "uncontended", "relock", "uncontended Lock+Unlock: goroutine runs per op vs relock's scripts alone", "goroutine runs per Lock+Unlock ÷ the scripts alone's",
		fmt.Sprintf("≤ %.1f× (±%.0f%%: sampled 1 in %d)", targetRunsVsScripts, 100*runsTolerance, schedSampling))
	if u != nil && alone != nil && alone.Runs > 0 {
		r := u.Runs / alone.Runs
		// The runtime records 1 run in schedSampling, so the ×8 estimates
		// of both rows are noisy: a ratio within runsTolerance above the
		// bound is not told apart from it.
		within := ""
		if r > targetRunsVsScripts && r <= targetRunsVsScripts+runsTolerance {
			within = fmt.Sprintf("; above %.1f× but within the %.0f%% sampling tolerance", targetRunsVsScripts, 100*runsTolerance)
		}
		// Three decimals: the two are often within a percent.
		t.set(r, r <= targetRunsVsScripts+runsTolerance, fmt.Sprintf("%.3f×", r), "%.3f× (%.2f vs %.2f runs/op)%s", r, u.Runs, alone.Runs, within)
	}
	ts = append(ts, t)
	t = target(1, "uncontended", "relock", "uncontended Lock+Unlock: allocations per op", "allocations per Lock+Unlock", fmt.Sprintf("≤ %.0f", targetAllocs))
	if u != nil {
		t.set(u.Allocs/targetAllocs, u.Allocs <= targetAllocs, fmt.Sprintf("%.1f", u.Allocs), "%.1f allocs/op (%.2f× the bound; the scripts alone %.0f)", u.Allocs, u.Allocs/targetAllocs, allocsOf(alone))
	}
	ts = append(ts, t)

	// 2. Uncontended latency, and the low-latency setup.
	t = target(2, "uncontended", "relock", "uncontended Lock+Unlock p50 vs relock's scripts alone, same client", "uncontended p50 ÷ the scripts alone's",
		fmt.Sprintf("≤ %.2f×", targetP50VsScripts))
	if u != nil && alone != nil && alone.P50 > 0 {
		r := float64(u.P50) / float64(alone.P50)
		t.set(r, r <= targetP50VsScripts, times(r), "%.2f× (%s vs %s)", r, fmtDur(u.P50), fmtDur(alone.P50))
	}
	ts = append(ts, t)
	// Against the PING through rueidis's pipeline goroutines, the path of
	// the default client's rows: a Lock+Unlock is two round trips, so against the
	// synchronous PING its ratio cannot go below 2.0×.
	t = target(2, "uncontended", "relock-nopipe", "DisableAutoPipelining: uncontended Lock+Unlock p50 vs rueidis PING p50 through the pipeline goroutines (and its distinct-keys throughput)",
		"DisableAutoPipelining: p50 ÷ pipelined PING p50", fmt.Sprintf("≤ %.1f× pipelined PING (throughput cost stated)", targetNoPipeVsPing))
	if pipelined := floorP50(res, floorPipelined); np != nil && pipelined > 0 {
		r := float64(np.P50) / float64(pipelined)
		cost, brief := "distinct keys not measured", "distinct keys –"
		if d, dn := distinct(res, "relock"), distinct(res, "relock-nopipe"); d != nil && dn != nil {
			brief = fmt.Sprintf("distinct keys %.2f× the default's ops/s", dn.OpsPerSec/d.OpsPerSec)
			cost = fmt.Sprintf("distinct keys: %s ops/s, %.2f× the default client's %s", fmtRate(dn.OpsPerSec), dn.OpsPerSec/d.OpsPerSec, fmtRate(d.OpsPerSec))
		}
		vsSync := ""
		if sync := floorP50(res, floorSync); sync > 0 {
			vsSync = fmt.Sprintf("; vs the synchronous PING (%s) %.2f×, where two round trips make 2.0× the floor", fmtDur(sync), float64(np.P50)/float64(sync))
		}
		t.set(r, r <= targetNoPipeVsPing, times(r)+"; "+brief, "%.2f× (%s vs pipelined PING %s%s); %s", r, fmtDur(np.P50), fmtDur(pipelined), vsSync, cost)
	}
	ts = append(ts, t)

	// 3. 64 goroutines on distinct keys.
	for _, peer := range []struct {
		id, name string
		want     float64
	}{{"bsm", "bsm/redislock (default)", targetVsBsm}, {"redsync", "redsync (default)", targetVsRedsync}, {"rueidislock-1key", "rueidislock (KeyMajority 1)", targetVsRueidisTuned}} {
		t := target(3, "distinct", "relock", "64 goroutines, distinct keys: ops/s vs "+peer.name, "distinct keys ÷ "+peer.name, fmt.Sprintf("≥ %.1f×", peer.want))
		rl, p := distinct(res, "relock"), distinct(res, peer.id)
		if rl != nil && p != nil && p.OpsPerSec > 0 {
			r := rl.OpsPerSec / p.OpsPerSec
			t.set(r, r >= peer.want, times(r), "%.2f× (%s vs %s ops/s)%s", r, fmtRate(rl.OpsPerSec), fmtRate(p.OpsPerSec), commandsFloor(distinct(res, "relock-commands"), p))
		}
		ts = append(ts, t)
	}

	// 4. The fair lock.
	fair, mx := hotKey(res, "relock-fair", 0), hotKey(res, "relock", 0)
	t = target(4, "hotkey", "relock-fair", "hot key, zero hold, 2 processes × 16: fair lock's handoffs/s vs the mutex's", "fair handoffs/s ÷ the mutex's (zero hold)",
		fmt.Sprintf("≥ %.1f×", targetFairVsMutex))
	if fair != nil && mx != nil && mx.HandoffsSec > 0 {
		r := fair.HandoffsSec / mx.HandoffsSec
		t.set(r, r >= targetFairVsMutex, times(r), "%.2f× (%s vs %s handoffs/s)", r, fmtRate(fair.HandoffsSec), fmtRate(mx.HandoffsSec))
	}
	ts = append(ts, t)
	ts = append(ts, fifoTarget(4, "relock-fair", "fair lock's", "fair", fair))
	t = target(4, "hotkey", "relock-fair", "hot key, zero hold: fair lock's wait max vs its wait p99", "fair wait max ÷ wait p99", fmt.Sprintf("≤ %.0f×", targetFairWaitMax))
	if fair != nil && fair.WaitP99 > 0 {
		r := float64(fair.WaitMax) / float64(fair.WaitP99)
		t.set(r, r <= targetFairWaitMax, times(r), "%.2f× (%s vs %s)", r, fmtDur(fair.WaitMax), fmtDur(fair.WaitP99))
	}
	ts = append(ts, t)
	// 5. The read-write lock.
	t = target(5, "hotkey-rw", "relock-rwlock-mix", "hot key, zero hold, rwlock 90% RLock / 10% Lock: Redis commands per handoff (reads and writes per second)",
		"rwlock 90/10: Redis commands/handoff", fmt.Sprintf("≤ %.0f", targetRWCommands))
	if rw := hotKey(res, "relock-rwlock-mix", 0); rw != nil && rw.Acquisitions > 0 {
		t.set(rw.Server.PerOp/targetRWCommands, rw.Server.PerOp <= targetRWCommands, fmt.Sprintf("%.1f", rw.Server.PerOp), "%.1f (%.2f× the bound); %s reads/s, %s writes/s",
			rw.Server.PerOp, rw.Server.PerOp/targetRWCommands, fmtRate(rw.ReadsSec), fmtRate(rw.WritesSec))
	}
	ts = append(ts, t)

	// 6. The watchdog at scale: relock's largest row.
	scale := watchdogScale(res)
	var big *WatchdogRow
	if len(scale) > 0 {
		big = &scale[len(scale)-1]
	}
	n, lease, every := "100k", "", ""
	if big != nil {
		n = fmtCount(big.Leases)
		if big.Lease > 0 {
			lease = fmt.Sprintf(" (%s lease, renewed every %s)", fmtDur(big.Lease), fmtDur(big.RenewEvery))
			every = ", renewed every " + fmtDur(big.RenewEvery)
		}
	}
	t = target(6, "watchdog", "relock", fmt.Sprintf("Lock+Unlock/s with %s leases held%s vs with none", n, lease), "Lock+Unlock/s with "+n+" held ÷ with none",
		fmt.Sprintf("≥ %.1f×", targetHeldVsNone))
	if big != nil && big.NoneHeld() > 0 && big.Acquired > 0 {
		none := big.NoneHeld()
		r := big.LockUnlockHeld / none
		bracket := ""
		if big.LockUnlockAfter > 0 {
			bracket = fmt.Sprintf(", the mean of %s before taking the leases and %s after releasing them", fmtRate(big.LockUnlockIdle), fmtRate(big.LockUnlockAfter))
		}
		t.set(r, r >= targetHeldVsNone, times(r), "%.2f× (%s vs %s per s%s)", r, fmtRate(big.LockUnlockHeld), fmtRate(none), bracket)
	}
	ts = append(ts, t)
	t = target(6, "watchdog", "relock", fmt.Sprintf("taking %s leases%s (%d goroutines; heap per held lease reported)", n, lease, keepConcurrency), "taking "+n+" leases",
		"≤ "+fmtDur(targetTake))
	if big != nil && big.Acquired > 0 {
		r := big.AcquireSec / targetTake.Seconds()
		t.set(r, big.Acquired == big.Leases && r <= 1, fmtSeconds(big.AcquireSec)+"; "+fmtRate(big.HeapPerLease)+" B/lease", "%s (%.2f× the bound); %s of %s taken; heap %s B per held lease", fmtSeconds(big.AcquireSec), r,
			fmtRate(float64(big.Acquired)), fmtRate(float64(big.Leases)), fmtRate(big.HeapPerLease))
	}
	ts = append(ts, t)
	t = target(6, "watchdog", "relock", fmt.Sprintf("renewing %s leases%s: round trips per 100 renewals due", n, lease), "round trips per 100 renewals due, "+n+" held"+every,
		fmt.Sprintf("≤ %.0f", targetRenewTrips))
	if big != nil && big.Acquired > 0 {
		if r, ok := tripsPer100Due(*big); ok {
			t.set(r, r <= targetRenewTrips && big.Lost == 0, fmt.Sprintf("%.3f", r), "%.3f (%s round trips/s for %s renewals due/s, over %s); %d lost", r, fmtRate(big.Held.RoundTripSec-big.Idle.RoundTripSec),
				fmtRate(float64(big.Acquired)/big.RenewEvery.Seconds()), fmtSeconds(big.Held.Seconds), big.Lost)
		}
	}
	ts = append(ts, t)

	// 7. Waiters at scale: a release wakes O(1) waiters.
	most := targetFanOutMaxWaiters
	if len(res.Waiters) > 0 {
		most = 0
		for _, w := range res.Waiters {
			most = max(most, w.Workers)
		}
	}
	for _, id := range waitKinds {
		t := target(7, "waiters", id, fmt.Sprintf("%s: EVALSHA per handoff at %s waiters vs at %d (a release wakes O(1) waiters)", kindName(id), fmtCount(most), targetFanOutBase),
			fmt.Sprintf("%s: EVALSHA/handoff, %s waiters ÷ %d", kindName(id), fmtCount(most), targetFanOutBase), fmt.Sprintf("≤ %.0f×", targetEvalshaFanOut))
		lo, hi := waitersAt(res, id, targetFanOutBase), waitersAt(res, id, most)
		if lo != nil && hi != nil && lo.Server.ScriptsOp > 0 {
			r := hi.Server.ScriptsOp / lo.Server.ScriptsOp
			t.set(r, r <= targetEvalshaFanOut, times(r), "%.2f× (%.2f vs %.2f EVALSHA/handoff)", r, hi.Server.ScriptsOp, lo.Server.ScriptsOp)
		}
		ts = append(ts, t)
	}
	return append(ts, wakeTargets(res)...)
}

// wakeTargets are group 8: a handoff wakes one process, however many
// processes wait, and a hold another's call ended is told at once.
func wakeTargets(res *Results) []Target {
	var ts []Target
	for _, id := range waitKinds {
		sp, main := spread(res, id), hotKey(res, id, 0)
		shape := "16 processes × 2"
		if sp != nil {
			shape = fmt.Sprintf("%d processes × %d", sp.Processes, sp.Workers/max(sp.Processes, 1))
		}
		t := target(8, "spread", id, fmt.Sprintf("hot key, zero hold, %s: %s handoffs/s vs its 2 processes × 16", shape, kindName(id)),
			kindName(id)+": handoffs/s, "+shape+" ÷ 2 × 16", fmt.Sprintf("≥ %.1f×", targetSpreadVsMain))
		if sp != nil && main != nil && main.HandoffsSec > 0 {
			r := sp.HandoffsSec / main.HandoffsSec
			t.set(r, r >= targetSpreadVsMain, times(r), "%.2f× (%s vs %s handoffs/s)", r, fmtRate(sp.HandoffsSec), fmtRate(main.HandoffsSec))
		}
		ts = append(ts, t)
		t = target(8, "spread", id, fmt.Sprintf("hot key, zero hold, %s: %s wait p99 vs its 2 processes × 16", shape, kindName(id)),
			kindName(id)+": wait p99, "+shape+" ÷ 2 × 16", fmt.Sprintf("≤ %.0f×", targetSpreadWaitP99))
		if sp != nil && main != nil && main.WaitP99 > 0 {
			r := float64(sp.WaitP99) / float64(main.WaitP99)
			t.set(r, r <= targetSpreadWaitP99, times(r), "%.2f× (%s vs %s)", r, fmtDur(sp.WaitP99), fmtDur(main.WaitP99))
		}
		ts = append(ts, t)
		t = target(8, "spread", id, fmt.Sprintf("hot key, zero hold, %s: %s Redis commands per handoff", shape, kindName(id)),
			kindName(id)+": Redis commands/handoff, "+shape, fmt.Sprintf("≤ %.0f", targetSpreadCommands))
		if sp != nil && sp.Acquisitions > 0 {
			t.set(sp.Server.PerOp/targetSpreadCommands, sp.Server.PerOp <= targetSpreadCommands, fmt.Sprintf("%.1f", sp.Server.PerOp), "%.1f (%.2f× the bound)", sp.Server.PerOp, sp.Server.PerOp/targetSpreadCommands)
		}
		ts = append(ts, t)
	}
	for _, id := range waitKinds {
		pod, base := pods(res, id)
		shape, baseShape := "64 processes × 1", "2 × 32"
		if pod != nil {
			shape = fmt.Sprintf("%d processes × 1", pod.Processes)
		}
		if base != nil {
			baseShape = fmt.Sprintf("%d × %d", base.Processes, base.Workers/max(base.Processes, 1))
		}
		t := target(8, "pods", id, fmt.Sprintf("hot key, zero hold, %s: %s handoffs/s vs the same waiters in %s processes", shape, kindName(id), baseShape),
			kindName(id)+": handoffs/s, "+shape+" ÷ "+baseShape, fmt.Sprintf("≥ %.1f×", targetPodsVsBase))
		if pod != nil && base != nil && base.HandoffsSec > 0 {
			r := pod.HandoffsSec / base.HandoffsSec
			t.set(r, r >= targetPodsVsBase, times(r), "%.2f× (%s vs %s handoffs/s)", r, fmtRate(pod.HandoffsSec), fmtRate(base.HandoffsSec))
		}
		ts = append(ts, t)
	}
	for _, id := range waitKinds {
		sp, pod := spread(res, id), podRow(res, id)
		spShape, podShape := "16 × 2", "64 × 1"
		if sp != nil {
			spShape = fmt.Sprintf("%d × %d", sp.Processes, sp.Workers/max(sp.Processes, 1))
		}
		if pod != nil {
			podShape = fmt.Sprintf("%d × 1", pod.Processes)
		}
		t := target(8, "spread", id, fmt.Sprintf("hot key, zero hold: %s processes woken per handoff (wake-up messages the processes received ÷ handoffs), at %s and at %s processes × waiters", kindName(id), spShape, podShape),
			kindName(id)+": processes woken/handoff, "+spShape+" and "+podShape, fmt.Sprintf("≤ %.0f", targetWoken))
		ws, okS := woken(sp)
		wp, okP := woken(pod)
		if okS && okP {
			worst := max(ws, wp)
			t.set(worst/targetWoken, worst <= targetWoken, fmt.Sprintf("%.2f, %.2f", ws, wp), "%.2f at %s (%s), %.2f at %s (%s)",
				ws, spShape, wakeSplit(sp), wp, podShape, wakeSplit(pod))
		}
		ts = append(ts, t)
	}
	for _, k := range lossKinds {
		t := target(8, "loss", k.ID, fmt.Sprintf("%s: ForceUnlock from another Client to the holder's lease.Context() done, default %s lease: p50 and p99 over ≥ %d force unlocks", lossName(k.Lib), fmtDur(relock.DefaultWatchdogTimeout), targetLossSamples),
			lossName(k.Lib)+": loss told, p50 / p99", fmt.Sprintf("reported; p99 ≤ %s", fmtDur(targetLossP99)))
		if l := lossOf(res, k.ID); l != nil && l.N > 0 {
			pass := l.Err == "" && l.N >= targetLossSamples && l.P99 <= targetLossP99
			t.set(float64(l.P99)/float64(targetLossP99), pass, fmtDur(l.P50)+" / "+fmtDur(l.P99), "p50 %s, p99 %s, max %s over %d force unlocks; %d later than %s (found by a renewal)%s",
				fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max), l.N, l.Late, fmtDur(lossLate), errNote(l.Err))
		}
		ts = append(ts, t)
	}
	ts = append(ts, uncontendedPathTargets(res)...)
	ts = append(ts, semaphoreTargets(res)...)
	return ts
}

// woken returns h's processes woken per handoff, if h was counted.
func woken(h *HotKeyRow) (float64, bool) {
	if h == nil {
		return 0, false
	}
	return h.WokenPerHandoff()
}

// wakeSplit renders h's wake-ups per handoff by channel.
func wakeSplit(h *HotKeyRow) string {
	n := float64(max(h.Acquisitions, 1))
	return fmt.Sprintf("%.2f named + %.2f broadcast", float64(h.WakeUps.Named)/n, float64(h.WakeUps.Broadcast)/n)
}

func errNote(err string) string {
	if err == "" {
		return ""
	}
	return "; error: " + err
}

// tripsPer100Due returns k's renewal round trips per 100 renewals due:
// round trips per second above idle ÷ (leases ÷ renewal interval ÷ 100).
func tripsPer100Due(k WatchdogRow) (float64, bool) {
	if k.Acquired == 0 || k.RenewEvery <= 0 {
		return 0, false
	}
	due := float64(k.Acquired) / k.RenewEvery.Seconds()
	return (k.Held.RoundTripSec - k.Idle.RoundTripSec) / (due / 100), true
}

func allocsOf(r *LatencyRow) float64 {
	if r == nil {
		return 0
	}
	return r.Allocs
}

// kindName names a relock row's kind.
func kindName(id string) string {
	switch id {
	case "relock":
		return "mutex"
	case "relock-reentrant":
		return "reentrant"
	case "relock-fair":
		return "fair"
	case "relock-semaphore":
		return "semaphore"
	}
	return id
}

// fmtCount renders 1000 as 1k, 100000 as 100k.
func fmtCount(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
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

// pods returns id's row in the pod shape, one waiter per process, and its
// baseline, the same waiters in fewer processes.
func pods(res *Results, id string) (pod, base *HotKeyRow) {
	pod = podRow(res, id)
	if pod == nil {
		return nil, nil
	}
	for i := range res.Pods {
		if r := &res.Pods[i]; r.ID == id && r.Err == "" && r.Workers == pod.Workers && r.Processes < pod.Processes {
			return pod, r
		}
	}
	return pod, nil
}

// podRow returns id's row in the pod shape: as many processes as waiters.
func podRow(res *Results, id string) *HotKeyRow {
	for i := range res.Pods {
		if r := &res.Pods[i]; r.ID == id && r.Err == "" && r.Processes == r.Workers {
			return r
		}
	}
	return nil
}

// lossOf returns the loss row of id.
func lossOf(res *Results, id string) *LossRow {
	for i := range res.Loss {
		if r := &res.Loss[i]; r.ID == id {
			return r
		}
	}
	return nil
}

// lossName names a loss row's kind.
func lossName(l Lib) string {
	switch l.ID {
	case "relock-rwlock-write":
		return "rwlock write"
	case "relock-rwlock-read":
		return "rwlock read"
	}
	return kindName(l.ID)
}

func spread(res *Results, id string) *HotKeyRow {
	for i := range res.Spread {
		if r := &res.Spread[i]; r.ID == id && r.Err == "" {
			return r
		}
	}
	return nil
}

// waitersAt returns id's waiters-at-scale row with n waiters.
func waitersAt(res *Results, id string, n int) *HotKeyRow {
	for i := range res.Waiters {
		if r := &res.Waiters[i]; r.ID == id && r.Workers == n && r.Err == "" && r.Acquisitions > 0 {
			return r
		}
	}
	return nil
}

// watchdogScale returns relock's watchdog rows at scale, by number of
// leases.
func watchdogScale(res *Results) []WatchdogRow {
	var rows []WatchdogRow
	for _, k := range res.WatchdogScale {
		if k.ID == "relock" && k.Renews {
			rows = append(rows, k)
		}
	}
	slices.SortFunc(rows, func(a, b WatchdogRow) int { return a.Leases - b.Leases })
	return rows
}

// commandsFloor is what the target of relock's distinct-key ops/s over
// peer's says of relock's commands alone (the floor of its Redis time:
// bench/relock.go, relockCommands), c, or "" without that row.
func commandsFloor(c, peer *ThroughputRow) string {
	if c == nil || peer == nil || peer.OpsPerSec == 0 {
		return ""
	}
	return fmt.Sprintf("; relock's commands alone, %s ops/s: %.2f×", fmtRate(c.OpsPerSec), c.OpsPerSec/peer.OpsPerSec)
}

// uncontendedPathTargets are group 9: the Redis time of an uncontended
// Lock+Unlock, and the latency of the fastest setup for one caller.
func uncontendedPathTargets(res *Results) []Target {
	var ts []Target
	u, bsm, np := uncontended(res, "relock"), uncontended(res, "bsm"), uncontended(res, "relock-nopipe")
	t := target(9, "uncontended", "relock", "uncontended Lock+Unlock: Redis µs per op (INFO commandstats, both scripts)", "Redis µs per Lock+Unlock",
		fmt.Sprintf("≤ %.0f µs", targetRedisUsec))
	if u != nil && u.Server.UsecKnown {
		t.set(u.Server.UsecOp/targetRedisUsec, u.Server.UsecOp <= targetRedisUsec, fmt.Sprintf("%.1f µs", u.Server.UsecOp), "%.1f µs per Lock+Unlock", u.Server.UsecOp)
	}
	ts = append(ts, t)
	t = target(9, "uncontended", "relock", "uncontended Lock+Unlock: Redis µs per op vs bsm/redislock's", "Redis µs ÷ bsm/redislock's", fmt.Sprintf("≤ %.1f×", targetRedisUsecVsBsm))
	if u != nil && bsm != nil && u.Server.UsecKnown && bsm.Server.UsecKnown && bsm.Server.UsecOp > 0 {
		r := u.Server.UsecOp / bsm.Server.UsecOp
		floor := ""
		if c := uncontended(res, "relock-commands"); c != nil && c.Server.UsecKnown {
			floor = fmt.Sprintf("; relock's commands alone, %.1f µs: %.2f×", c.Server.UsecOp, c.Server.UsecOp/bsm.Server.UsecOp)
		}
		t.set(r, r <= targetRedisUsecVsBsm, times(r), "%.2f× (%.1f vs %.1f µs)%s", r, u.Server.UsecOp, bsm.Server.UsecOp, floor)
	}
	ts = append(ts, t)
	t = target(9, "uncontended", "relock-nopipe", "uncontended Lock+Unlock p50, the fastest setup for one caller (a client with DisableAutoPipelining) vs bsm/redislock at its defaults",
		"fastest setup's p50 ÷ bsm/redislock's", fmt.Sprintf("≤ %.1f×", targetFastestVsBsm))
	if np != nil && bsm != nil && bsm.P50 > 0 {
		r := float64(np.P50) / float64(bsm.P50)
		floor := ""
		if c := uncontended(res, "relock-commands-nopipe"); c != nil {
			floor = fmt.Sprintf("; relock's commands alone on such a client, %s: %.2f×", fmtDur(c.P50), float64(c.P50)/float64(bsm.P50))
		}
		t.set(r, r <= targetFastestVsBsm, times(r), "%.2f× (%s vs %s)%s", r, fmtDur(np.P50), fmtDur(bsm.P50), floor)
	}
	ts = append(ts, t)
	t = target(9, "uncontended", "relock", "uncontended Lock+Unlock p50 at rueidis's defaults vs two pipelined PINGs plus the scripts' Redis time", "p50 ÷ (2 × PING + Redis µs)", "≤ 1.0×")
	if ping := floorP50(res, floorPipelined); u != nil && ping > 0 && u.Server.UsecKnown {
		bound := 2*ping + time.Duration(u.Server.UsecOp*float64(time.Microsecond))
		r := float64(u.P50) / float64(bound)
		peers := ""
		if goPing := floorP50(res, floorOf(clientGoRedis)); bsm != nil && goPing > 0 && bsm.Server.UsecKnown {
			b := 2*goPing + time.Duration(bsm.Server.UsecOp*float64(time.Microsecond))
			peers = fmt.Sprintf("; bsm/redislock by the same measure: %.2f× (%s vs 2 × %s + %.1f µs)", float64(bsm.P50)/float64(b), fmtDur(bsm.P50), fmtDur(goPing), bsm.Server.UsecOp)
		}
		t.set(r, r <= 1, times(r), "%.2f× (%s vs 2 × %s + %.1f µs = %s)%s", r, fmtDur(u.P50), fmtDur(ping), u.Server.UsecOp, fmtDur(bound), peers)
	}
	ts = append(ts, t)
	return ts
}

// semaphoreTargets are group 10: the semaphore's uncontended latency and
// its grants with permits in flight.
func semaphoreTargets(res *Results) []Target {
	var ts []Target
	su, mu := uncontended(res, "relock-semaphore"), uncontended(res, "relock")
	t := target(10, "uncontended", "relock-semaphore", "uncontended semaphore Acquire(1)+Unlock p50 vs the mutex's Lock+Unlock", "semaphore p50 ÷ the mutex's",
		fmt.Sprintf("≤ %.1f×", targetSemaphoreP50))
	if su != nil && mu != nil && mu.P50 > 0 {
		r := float64(su.P50) / float64(mu.P50)
		t.set(r, r <= targetSemaphoreP50, times(r), "%.2f× (%s vs %s)", r, fmtDur(su.P50), fmtDur(mu.P50))
	}
	ts = append(ts, t)
	sh, mh := hotKey(res, "relock-semaphore", 0), hotKey(res, "relock", 0)
	t = target(10, "hotkey", "relock-semaphore", fmt.Sprintf("hot key, zero hold, 2 processes × 16: semaphore (size %d) grants/s vs the mutex's handoffs/s", semaphoreSize),
		"semaphore grants/s ÷ the mutex's handoffs/s", fmt.Sprintf("≥ %.0f×", targetSemaphoreGrants))
	if sh != nil && mh != nil && mh.HandoffsSec > 0 {
		r := sh.HandoffsSec / mh.HandoffsSec
		t.set(r, r >= targetSemaphoreGrants, times(r), "%.2f× (%s vs %s)", r, fmtRate(sh.HandoffsSec), fmtRate(mh.HandoffsSec))
	}
	ts = append(ts, t)
	ts = append(ts, fifoTarget(10, "relock-semaphore", "semaphore's", "semaphore", sh))
	return ts
}

// fifoTarget is group n's target of no FIFO violations in row, lib's
// hot-key row at zero hold; whose and short name the lock in the target's
// long and short names.
func fifoTarget(n int, lib, whose, short string, row *HotKeyRow) Target {
	t := target(n, "hotkey", lib, fmt.Sprintf("hot key, zero hold: %s FIFO violations (grants overtaking a waiter that began ≥ %s earlier)", whose, fmtDur(fifoTolerance)),
		short+" FIFO violations", "0")
	if row != nil && row.FIFOViolations >= 0 {
		r := float64(row.FIFOViolations) / float64(max(row.Acquisitions, 1))
		t.set(r, row.FIFOViolations == 0, fmt.Sprint(row.FIFOViolations), "%d of %s grants", row.FIFOViolations, fmtRate(float64(row.Acquisitions)))
	}
	return t
}
