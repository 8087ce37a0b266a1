package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/relockgo/relock"
)

// writeResults writes results.json, the plots and report.md into dir.
func writeResults(res *Results, dir string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots, err := writePlots(res, dir)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(report(res, plots)), 0o644)
}

// report renders res as markdown; plots are the PNG files written beside it.
func report(res *Results, plots []plotFile) string {
	var w mdWriter
	m := res.Meta
	floor := rtt(res)

	w.text("# relock and its peers: benchmark report")
	w.text("")
	if m.Smoke {
		w.text("> **Smoke run.** Every scenario ran for a fraction of a second: these figures check that the benchmark works and are not measurements.")
		w.text("")
	}
	w.text("| | |")
	w.text("|---|---|")
	w.row("date", m.Date.Format("2006-01-02 15:04 MST"))
	w.row("command", "`"+m.Command+"`")
	kernel := ""
	if m.Kernel != "" {
		kernel = ", kernel " + m.Kernel
	}
	w.row("machine", fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s%s", m.CPU, m.Cores, m.GOMAXPROCS, m.OS, kernel))
	w.row("Go", m.Go)
	w.row("Redis", fmt.Sprintf("%s, %s; clients and server share the machine's cores", m.Redis, m.RedisWhere))
	libs := libraryVersions(m.Modules)
	if m.Relock != "" {
		libs = strings.Replace(libs, "relock (this tree)", "relock (this tree, commit "+m.Relock+")", 1)
	}
	w.row("libraries", libs)
	heldLoop := res.Durations["held_loop"]
	if heldLoop == "" { // results written before it had its own duration
		heldLoop = res.Durations["lock_loop"]
	}
	w.row("durations", fmt.Sprintf("scenarios 1–3: %s per row; hot key (2 × 16, 16 × 2, the pod shape and its baseline): %s per row; waiters at scale: %s per row; watchdog comparison: %s held after %s idle; relock's watchdog at scale: %s held after %s idle, its Lock+Unlock %s before taking the leases, %s while holding them and %s after releasing them; loss notice: %s force unlocks per kind; whole run %s",
		res.Durations["uncontended"], res.Durations["hot_key"], orDash(res.Durations["waiters"]), res.Durations["watchdog_window"], res.Durations["watchdog_idle"],
		orDash(res.Durations["watchdog_scale_window"]), res.Durations["watchdog_idle"], orDash(res.Durations["lock_loop"]), orDash(heldLoop), orDash(res.Durations["lock_loop"]),
		orDash(res.Durations["loss_samples"]), m.Elapsed))
	w.row("previous run", previousCell(res.Previous))
	w.text("")
	w.text("Absolute figures drift between machines and runs; the ratios (relock ÷ peer, and figures over the PING round trip of scenario 1) are what to compare. Every library runs at its documented defaults; a *tuned* row uses the retry options the library offers. relock has no retry knobs: its waiters are woken by the release.")
	w.text("")

	peersSection(&w, res)
	targetsSection(&w, res)

	w.text("## 1. Round-trip floor")
	w.text("")
	w.text("PING, one at a time, through each client at its defaults, and through rueidis with `DisableAutoPipelining: true`. rueidis's default client has two paths, each with a row on a client of its own: while a connection's pipeline goroutines have not started and one caller is on it, a command whose ctx has a deadline is written and its reply read on the caller's goroutine (*synchronous*); a ctx that can be canceled and has no deadline, or a concurrent caller, starts the pipeline, a writer and a reader goroutine that every later command of the connection goes through (*pipelined*). *Goroutine runs/op* as in scenario 2.")
	w.text("")
	w.text("| client | I/O path of the PING | used by | PING p50 | mean | PING p99 | goroutine runs/op | samples |")
	w.text("|---|---|---|---|---|---|---|---|")
	for _, f := range res.Floor {
		users, path := "relock, rueidislock", ""
		switch f.Client {
		case floorPipelined:
			path = "queued to the connection's writer goroutine, the reply handed over by its reader goroutine (every call with a ctx that can be canceled and has no deadline)"
			users = "relock, rueidislock: the path of their rows; **RTT**"
		case floorSync:
			path = "written and read on the caller's goroutine, no pipeline goroutines (a client of its own, every call with a deadline)"
			users = "relock, rueidislock, before anything starts the pipeline"
		case clientBusy:
			path = "pipelined, as above"
			users = "diagnostic: a goroutine spins on one core meanwhile"
		case clientRueidisNoPipe:
			path = "a pooled connection per call, written and read on the caller's goroutine"
			users = "relock's low-latency setup"
		case clientGoRedis:
			path = "a pooled connection per call, written and read on the caller's goroutine"
			users = "redsync, bsm/redislock"
		}
		if f.Err != "" {
			w.line("| %s | %s | %s | error: %s | | | | |", f.Client, orDash(path), users, cell(f.Err))
			continue
		}
		w.line("| %s | %s | %s | %s | %s | %s | %.1f | %d |", f.Client, orDash(path), users, fmtDur(f.P50), fmtDur(f.Mean), fmtDur(f.P99), f.Runs, f.N)
	}
	w.text("")
	if g := clientFloor(res, "go-redis"); g > 0 && floor > 0 {
		w.line("go-redis ÷ rueidis PING p50, pipelined: %.2f×. **RTT** below is the pipelined rueidis PING p50, %s: the default rueidis client's lock rows go through its pipeline goroutines (concurrent calls start them, and so does one call with a ctx that can be canceled and has no deadline, as `go run .`'s is), so their *÷ PING* and *× RTT* are against it.",
			float64(g)/float64(floor), fmtDur(floor))
		w.text("")
	}
	if sync := floorP50(res, floorSync); sync > 0 && floor > 0 {
		w.line("The synchronous PING takes %s, %.2f× the pipelined one. A Lock+Unlock is two round trips, so against the synchronous PING its ratio cannot go below 2.0×, and target 2's 1.6× for the DisableAutoPipelining row (synchronous, on a pooled connection) could not be met on that path; the target is therefore stated against the pipelined PING, the path of the default client's rows, and evaluated against that row.",
			fmtDur(sync), float64(sync)/float64(floor))
		w.text("")
	}
	if b := clientFloor(res, clientBusy); b > 0 && floor > 0 && b < floor {
		w.line("With one core kept busy, the same PING takes %s: %s of the round trip (%s) is the cost of waking an idle core. Such wake-ups are slow on virtual machines, and whether a round trip pays them depends on where the scheduler runs the client's threads and the server: go-redis reads the reply on the calling goroutine, so client and server can take turns on one core, while rueidis hands each command to its writer and reader goroutines, which may wake a thread on another core. Rows whose round trips pay the wake-up only some of the time have bimodal latencies, with p50 and mean far apart; compare their means too.",
			fmtDur(b), fmtPct(float64(floor-b)/float64(floor)), fmtDur(floor-b))
		w.text("")
	}

	w.text("## 2. Uncontended Lock+Unlock")
	w.text("")
	w.line("One goroutine locks and unlocks one key, again and again. *÷ PING* divides the p50 by the PING p50 of the library's own client on the path its rows take: for rueidis's default client the pipelined PING, for the DisableAutoPipelining row that client's PING, for go-redis go-redis's. Allocations are `runtime.MemStats` deltas over the timed loop, per operation, for the whole process (the library's background goroutines included). *Goroutine runs/op* counts, over the same loop and process, how often goroutines were scheduled to run: the `%s` histogram's count times %d, ÷ operations. Redis commands are `INFO` deltas per operation and include those a script runs (`SET`, `INCR`, `PUBLISH`… inside one `EVALSHA`); *Redis µs/op* is the time of the commands the client sent, a script's time counted once, in its `EVALSHA` (see Targets).", schedMetric, schedSampling)
	w.text("")
	w.text("| library | configuration | client I/O | p50 | mean | p99 | p50 ÷ PING | relock ÷ this (p50) | allocs/op | B/op | goroutine runs/op | Redis commands/op | Redis µs/op |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	base := uncontended(res, "relock")
	for _, u := range res.Uncontended {
		if u.Err != "" {
			w.line("| %s | %s | %s | unavailable: %s | | | | | | | | | |", u.Name, u.Variant, ioMode(u.Client), cell(u.Err))
			continue
		}
		vsFloor, vsRelock := "–", "–"
		if f := clientFloor(res, u.Client); f > 0 {
			vsFloor = fmt.Sprintf("%.2f×", float64(u.P50)/float64(f))
		}
		if base != nil && u.P50 > 0 {
			vsRelock = fmt.Sprintf("%.2f", float64(base.P50)/float64(u.P50))
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.1f | %.1f (%s) | %s |", u.Name, u.Variant, ioMode(u.Client), fmtDur(u.P50), fmtDur(u.Mean), fmtDur(u.P99), vsFloor, vsRelock,
			u.Allocs, u.Bytes, u.Runs, u.Server.PerOp, u.Server.Top, usecOp(u.Server))
	}
	w.text("")

	plotLink(&w, plots, "uncontended")

	w.text("## 3. 64 goroutines on distinct keys")
	w.text("")
	w.text("64 goroutines share one client of the library; each locks and unlocks a key of its own. *Client I/O* is how the row's client talks to Redis: rueidis auto-pipelining (every goroutine's commands written to one shared connection by a writer goroutine, replies read by a reader goroutine), rueidis with DisableAutoPipelining (each call takes a pooled connection and reads its reply itself), or go-redis's connection pool. *× RTT* is operations per second times the RTT: how many Lock+Unlock pairs complete per PING round-trip time. *Redis µs/op* counts a script's time once, in its `EVALSHA` (see Targets).")
	w.text("")
	w.text("| library | configuration | client I/O | ops/s | relock ÷ this | × RTT | p50 | p99 | Redis commands/op | Redis µs/op | Redis CPU | failed |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|")
	dbase := distinct(res, "relock")
	for _, d := range res.Distinct {
		if d.Ops == 0 {
			w.line("| %s | %s | %s | unavailable: %s | | | | | | | | |", d.Name, d.Variant, ioMode(d.Client), cell(d.Err))
			continue
		}
		vsRelock := "–"
		if dbase != nil {
			vsRelock = fmt.Sprintf("%.2f", dbase.OpsPerSec/d.OpsPerSec)
		}
		w.line("| %s | %s | %s | %s | %s | %.2f | %s | %s | %.1f | %s | %s | %d |", d.Name, d.Variant, ioMode(d.Client), fmtRate(d.OpsPerSec), vsRelock, d.OpsPerSec*floor.Seconds(),
			fmtDur(d.P50), fmtDur(d.P99), d.Server.PerOp, usecOp(d.Server), fmtPct(d.Server.CPU/d.Seconds), d.Failed)
	}
	w.text("")
	if d, dn := distinct(res, "relock"), distinct(res, "relock-nopipe"); d != nil && dn != nil {
		w.line("DisableAutoPipelining's throughput cost on distinct keys: relock's mutex on such a client runs %s ops/s, %.2f× its %s on the default client.", fmtRate(dn.OpsPerSec), dn.OpsPerSec/d.OpsPerSec, fmtRate(d.OpsPerSec))
		w.text("")
	}
	plotLink(&w, plots, "distinct")

	w.text("## 4–5. One hot key, 32 waiters in 2 processes")
	w.text("")
	w.line("Two processes, each with one client of the library and 16 waiters, take the same key in a loop: lock, hold (zero or 1 ms), unlock, lock again. A *handoff* is an acquisition; *switches* counts those by a different waiter than the previous holder (a library can post a high handoff rate by letting one waiter re-take the lock it just released). *Wait* runs from a waiter's first Lock call to the one that succeeds; waits still open when the row ends count with their length so far. *Jain* is Jain's fairness index over the 32 waiters' acquisitions (1: equal shares; 1/32 ≈ 0.03: one waiter took everything). *Failures* are Lock calls that gave up by design (a single try, or tries exhausted) — the waiter called Lock again at once. *Of ceiling* divides handoffs/s by 1/(hold + 2·RTT), the rate if each handoff cost only a release and an acquire round trip. *FIFO violations* counts the grants that overtook a waiter whose Lock call had begun at least %s earlier and who was still waiting (see Targets); a FIFO lock has none. relock's fair lock and read-write lock (90%% RLock, 10%% Lock; read holds overlap, so switches and FIFO order are not counted; its handoffs are split into read and write acquisitions) are in the same table.", fmtDur(fifoTolerance))
	w.text("")
	for _, hold := range holdsOf(res) {
		w.line("### Hold %s", fmtHold(hold))
		w.text("")
		hotKeyTable(&w, res.HotKey, hotKey(res, "relock", hold), hold, floor)
	}
	for _, h := range res.HotKey {
		if h.Relock && h.Err == "" && h.WaitP99 > 3*time.Second {
			w.line("relock %s (%s) at %s hold: wait p99 %s, near the 5 s a relock waiter sleeps at most when no wake-up comes. Those waiters missed the wake-up that should have ended their wait.",
				strings.TrimPrefix(h.Name, "relock "), h.Variant, fmtHold(h.Hold), fmtDur(h.WaitP99))
			w.text("")
		}
	}
	plotLink(&w, plots, "handoffs")
	plotLink(&w, plots, "fairness")
	plotLink(&w, plots, "wait")
	spreadSection(&w, res)
	podsSection(&w, res)
	ringSection(&w, res)
	waitersSection(&w, res)

	w.text("## 6. Watchdog cost")
	w.text("")
	w.line("A process of its own takes N leases of distinct names and keeps them for the window, every library at the same lease, %s, renewed every %s (relock: `WithWatchdogTimeout(%s)`; rueidislock: `KeyValidity` %s, `ExtendInterval` %s); relock at its default lease is in the next table.",
		fmtDur(watchdogTimeout), fmtDur(renewEvery(watchdogTimeout)), goDuration(watchdogTimeout), fmtDur(watchdogTimeout), fmtDur(renewEvery(watchdogTimeout)))
	w.text("*Idle* is the same process with its client open and nothing held, measured first. Commands and Redis CPU are `INFO` deltas; round trips are the `Do` and `DoMulti` calls the library made on its rueidis client (rueidis may write concurrent calls to the socket together, so this counts what the library asks for); client CPU is `getrusage(RUSAGE_SELF)`, as a share of one core.")
	w.text("")
	w.text("| library | configuration | lease (renewed every) | leases held | lost | Redis commands/s (idle) | round trips/s (idle) | client CPU (idle) | Redis CPU (idle) | commands / lease / s | round trips / lease / s |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|")
	var wbase *WatchdogRow
	for i := range res.Watchdog {
		if res.Watchdog[i].ID == "relock" && res.Watchdog[i].Err == "" {
			wbase = &res.Watchdog[i]
		}
	}
	for _, k := range res.Watchdog {
		if !k.Renews {
			w.line("| %s | | – | – | – | %s | | | | | |", k.Name, k.Note)
			continue
		}
		if k.Acquired == 0 {
			w.line("| %s | %s | %s | unavailable: %s | | | | | | | |", k.Name, k.Variant, leaseCell(k), cell(k.Err))
			continue
		}
		held := fmt.Sprintf("%d of %d", k.Acquired, k.Leases)
		n := float64(k.Acquired)
		w.line("| %s | %s | %s | %s | %d | %s (%s) | %s (%s) | %s (%s) | %s (%s) | %.2f | %.4f |", k.Name, k.Variant, leaseCell(k), held, k.Lost,
			fmtRate(k.Held.CommandsSec), fmtRate(k.Idle.CommandsSec), fmtRate(k.Held.RoundTripSec), fmtRate(k.Idle.RoundTripSec),
			fmtPct(k.Held.ClientCPU), fmtPct(k.Idle.ClientCPU), fmtPct(k.Held.RedisCPU), fmtPct(k.Idle.RedisCPU),
			(k.Held.CommandsSec-k.Idle.CommandsSec)/n, (k.Held.RoundTripSec-k.Idle.RoundTripSec)/n)
	}
	w.text("")
	if wbase != nil {
		for _, k := range res.Watchdog {
			if !k.Renews || k.Relock || k.Acquired == 0 {
				continue
			}
			w.line("relock ÷ %s (%s), above idle: commands/s %s, round trips/s %s, client CPU %s, Redis CPU %s.", k.Name, k.Variant,
				ratioAbove(wbase.Held.CommandsSec, wbase.Idle.CommandsSec, k.Held.CommandsSec, k.Idle.CommandsSec),
				ratioAbove(wbase.Held.RoundTripSec, wbase.Idle.RoundTripSec, k.Held.RoundTripSec, k.Idle.RoundTripSec),
				ratioAbove(wbase.Held.ClientCPU, wbase.Idle.ClientCPU, k.Held.ClientCPU, k.Idle.ClientCPU),
				ratioAbove(wbase.Held.RedisCPU, wbase.Idle.RedisCPU, k.Held.RedisCPU, k.Idle.RedisCPU))
			w.text("")
		}
		w.line("relock's window: %s.", commandList(wbase.Held.Commands, wbase.Held.Seconds))
		w.text("")
	}
	for _, k := range res.Watchdog {
		if !k.Renews || k.Acquired == 0 {
			continue
		}
		trips := (k.Held.RoundTripSec - k.Idle.RoundTripSec) / float64(k.Acquired)
		if k.ID == "rueidislock" && trips > 3 {
			lost := ""
			if k.Lost > 0 {
				lost = fmt.Sprintf(" Under that load it lost %d of its %d leases within the window.", k.Lost, k.Acquired)
			}
			w.line("rueidislock at its defaults made %.1f round trips per lease per second where 3 were due (one per key of its 3): without `NoLoopTracking`, every extension's own write comes back to the holder as a client-side-caching invalidation, on which its keep-alive extends again.%s", trips, lost)
			w.text("")
		} else if k.Lost > 0 {
			w.line("%s (%s) lost %d of its %d leases within the window.", k.Name, k.Variant, k.Lost, k.Acquired)
			w.text("")
		}
	}
	plotLink(&w, plots, "watchdog")
	watchdogScaleSection(&w, res)
	lossSection(&w, res)

	if len(res.Profiles) > 0 {
		w.text("## Profiles where relock missed")
		w.text("")
		w.text("For each scenario where relock's mutex missed a target, its row was run again under the CPU profiler (`runtime/pprof`; in the hot-key scenarios, in the first of the processes). The figures of that second run are not in the tables above. Open a profile with `go tool pprof -http=: <file>`.")
		w.text("")
		for _, p := range res.Profiles {
			profileSection(&w, res, p)
		}
	}

	if res.Redlock != nil {
		redlockSection(&w, res.Redlock)
	}
	if res.Replica != nil {
		replicaSection(&w, res.Replica)
	}

	w.text("## Method")
	w.text("")
	w.line("- One binary runs everything against the same Redis; the hot-key rows re-execute it as child processes (2, 16, %s, or up to 4 for the waiters at scale), which print their figures as JSON for the parent to merge, and the watchdog rows run in a child process so that its CPU is the library's alone. The loss notice rows run in the parent process.", podProcsText(res))
	w.text("- Every library gets its own client connection(s) at the client's defaults (rueidis: auto-pipelining on one connection; go-redis: a pool of 10 connections per core), but for relock's DisableAutoPipelining row (a pooled connection per call). A lock value is made for every Lock call, as a user with a dynamic key would (relock's `mutex.New` and the others are cheap; redsync's Mutex carries its value and cannot be shared).")
	w.text("- In scenarios 2 and 3 every library's Lock gets a ctx that never ends (`context.WithoutCancel` of the run's): a caller that waits as long as it takes; the rows are bounded by time. relock runs such a Lock's attempt on the caller's goroutine; under a ctx that can end it runs the attempt in a goroutine the caller leaves at the ctx's end (rueidis heeds a cancellation only in its pipeline, and none while it dials again), which its *deadline per Lock* row measures. The hot-key waiters' Locks have a deadline.")
	w.text("- bsm/redislock has no default TTL; it gets 8 s, redsync's default expiry. relock and rueidislock renew their leases themselves.")
	w.line("- Watchdog leases: the comparison of scenario 6 runs every library at a %s lease renewed every %s (relock `WithWatchdogTimeout(%s)`, rueidislock `KeyValidity` %s and `ExtendInterval` %s), over a %s window; relock's rows at scale run at its default, `relock.DefaultWatchdogTimeout`, a %s lease renewed every %s, over a %s window. Renewals due per second are each row's leases ÷ its own renewal interval.",
		fmtDur(watchdogTimeout), fmtDur(renewEvery(watchdogTimeout)), goDuration(watchdogTimeout), fmtDur(watchdogTimeout), fmtDur(renewEvery(watchdogTimeout)), orDash(res.Durations["watchdog_window"]),
		fmtDur(relock.DefaultWatchdogTimeout), fmtDur(renewEvery(relock.DefaultWatchdogTimeout)), orDash(res.Durations["watchdog_scale_window"]))
	w.text("- Latencies are nearest-rank percentiles of every operation (up to a cap per row); throughput is operations over the wall time of the row.")
	w.text("- What the tables measure is also held by tests that fail when it grows: `TestLockUnlockRoundTrips` and `TestTryLockHeld` (package mutex) count the round trips of a Lock, an Unlock and a TryLock on a held lock (one each), `TestLockUnlockAllocs` (root package) the allocations of a Lock+Unlock, and `TestCommandBudget` (package luascripts) the Redis commands of each hot path's script.")
	w.text("- The DisableAutoPipelining row is two synchronous round trips and two scripts. `BenchmarkNoPipeliningFloor` (root package: `go test -run '^$' -bench NoPipeliningFloor -benchtime 3000x -count 3 .`) times, interleaved in one process, each p50 against the pipelined PING's: two `EVALSHA` of a script that only returns, relock's two scripts alone, and its Lock+Unlock, which separates the engine's cost from the scripts' own Redis time and from the round trips'.")
	w.text("- Redis figures are `INFO` deltas taken around each row (the `INFO` itself is subtracted); on a shared Redis (`-redis`) they include other clients' traffic. Redis µs/op counts the commands the clients sent, each script's time once (see Targets).")
	return w.String()
}

// profileSection renders one profile and what it shows.
func profileSection(w *mdWriter, res *Results, p ProfileSummary) {
	title := map[string]string{"uncontended": "Uncontended Lock+Unlock", "distinct": "64 goroutines on distinct keys", "hotkey": "Hot key, zero hold",
		"spread": "Hot key, zero hold, waiters in 16 processes"}[p.Scenario]
	w.line("### %s", title)
	w.text("")
	var names []string
	for _, t := range res.Targets {
		if t.Scenario == p.Scenario && t.Lib == "relock" && t.Known && !t.Pass {
			names = append(names, fmt.Sprintf("%s (%s, wanted %s)", t.Name, t.Got, t.Want))
		}
	}
	w.line("Missed: %s.", strings.Join(names, "; "))
	w.text("")
	if p.Err != "" {
		w.line("The profile could not be taken: %s.", p.Err)
		w.text("")
		return
	}
	w.line("Profile: [`%s`](%s), %.1f s of client CPU over %.1f s (%s of one core).", p.File, p.File, p.CPUSeconds, p.Seconds, fmtPct(p.CPUSeconds/p.Seconds))
	w.text("")
	w.text("| where the client's CPU went | share |")
	w.text("|---|---|")
	for _, c := range p.Categories {
		w.line("| %s | %s |", c.Name, fmtPct(c.Share))
	}
	w.text("")
	w.text("<details><summary>Top functions by self time</summary>")
	w.text("")
	w.text("| function | self |")
	w.text("|---|---|")
	for _, t := range p.Top {
		w.line("| `%s` | %s |", t.Name, fmtPct(t.Share))
	}
	w.text("")
	w.text("</details>")
	w.text("")
	w.line("What it shows: %s", profileReading(res, p))
	w.text("")
}

// profileReading states, from the figures, where relock's time goes in the
// profiled scenario.
func profileReading(res *Results, p ProfileSummary) string {
	share := func(list []ProfileShare, name string) float64 {
		for _, c := range list {
			if strings.HasPrefix(c.Name, name) {
				return c.Share
			}
		}
		return 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of the client's CPU samples pass through relock's code (what it calls included), %s through rueidis. "+
		"By where the CPU itself went: socket system calls %s, the Go scheduler and goroutine wake-ups %s, allocation and GC %s, relock's own code %s, "+
		"Go's context, time and sync code %s (relock makes one context per hold, canceled with a cause when it ends, which its first lease carries; releases share one deadline per second). ",
		fmtPct(share(p.Through, "relock")), fmtPct(share(p.Through, "rueidis")),
		fmtPct(share(p.Categories, "socket")), fmtPct(share(p.Categories, "scheduler")),
		fmtPct(share(p.Categories, "memory")+share(p.Categories, "garbage")), fmtPct(share(p.Categories, "relock")),
		fmtPct(share(p.Categories, "context")))
	floor := rtt(res)
	switch p.Scenario {
	case "uncontended":
		u, alone, bsm := uncontended(res, "relock"), uncontended(res, "relock-scripts"), uncontended(res, "bsm")
		if u == nil || floor == 0 {
			break
		}
		fmt.Fprintf(&b, "The client is idle most of each operation, waiting on two round trips; the profile shows where the CPU it does use goes. ")
		if alone != nil {
			fmt.Fprintf(&b, "relock's two scripts called alone, through the same client and without the engine, take %s at p50 (%.2f× PING) and %s on average; relock takes %s and %s. ",
				fmtDur(alone.P50), float64(alone.P50)/float64(floor), fmtDur(alone.Mean), fmtDur(u.P50), fmtDur(u.Mean))
			if d := u.Mean - alone.Mean; d > 0 {
				fmt.Fprintf(&b, "The engine (lease, context and watchdog bookkeeping, and the goroutine wake-ups it causes) adds %s on average, ", fmtDur(d))
			} else {
				b.WriteString("The engine adds no latency that this machine can resolve, ")
			}
			fmt.Fprintf(&b, "with %.0f allocations (%.0f B) and %.1f goroutine runs per Lock+Unlock against %.0f (%.0f B) and %.1f for the scripts alone. ",
				u.Allocs, u.Bytes, u.Runs, alone.Allocs, alone.Bytes, alone.Runs)
		}
		fmt.Fprintf(&b, "On Redis, a relock Lock+Unlock runs %.0f commands in %.1f µs of server time (%s)", u.Server.PerOp, u.Server.UsecOp, u.Server.Top)
		if bsm != nil {
			fmt.Fprintf(&b, ", where bsm/redislock runs %.0f in %.1f µs: the fencing token (TIME, SET … GET), the queue and gone checks and the wake-up PUBLISH are work the peers do not do", bsm.Server.PerOp, bsm.Server.UsecOp)
		}
		if c := uncontended(res, "relock-commands"); c != nil && c.Server.UsecKnown {
			fmt.Fprintf(&b, "; those commands alone, in two functions that do nothing else, take %.1f µs", c.Server.UsecOp)
		}
		fmt.Fprintf(&b, ". Two round trips at the PING p50 are %s; relock's p50 is %s. On this %d-core machine the client and the single-threaded server share the cores, so every microsecond of client and script work lengthens the round trip.",
			fmtDur(2*floor), fmtDur(u.P50), res.Meta.Cores)
	case "distinct":
		d, alone := distinct(res, "relock"), distinct(res, "relock-scripts")
		if d == nil {
			break
		}
		if alone != nil {
			fmt.Fprintf(&b, "relock's scripts called alone by 64 goroutines reach %s ops/s, relock %s: the engine costs %s of the throughput. ",
				fmtRate(alone.OpsPerSec), fmtRate(d.OpsPerSec), fmtPct(1-d.OpsPerSec/alone.OpsPerSec))
		}
		if c := distinct(res, "relock-commands"); c != nil {
			fmt.Fprintf(&b, "The commands relock's contract needs, alone in two functions that do nothing else, reach %s ops/s at %.1f µs of server time per operation: the floor of any design that keeps the contract. ", fmtRate(c.OpsPerSec), c.Server.UsecOp)
		}
		fmt.Fprintf(&b, "Redis was busy %s of the time at %.1f µs of server time per operation (%s). ", fmtPct(d.Server.CPU/d.Seconds), d.Server.UsecOp, d.Server.Top)
		if d.Server.CPU/d.Seconds > 0.8 {
			b.WriteString("The single-threaded server is near saturation: throughput is bound by the scripts' cost on Redis, heavier than the peers' (see the commands per operation above).")
		} else {
			fmt.Fprintf(&b, "With %d cores, the client's CPU competes with Redis for the same cores: the client work per operation (above) and the scripts' server time (heavier than the peers', see the commands per operation) together set the throughput.", res.Meta.Cores)
		}
	case "hotkey", "spread":
		h := hotKey(res, "relock", 0)
		if p.Scenario == "spread" {
			h = spread(res, "relock")
		}
		if h == nil {
			break
		}
		fmt.Fprintf(&b, "On Redis each handoff cost %.1f commands (%s), %.1f µs of server time and %.2f EVALSHA; Redis was busy %s of the time. ",
			h.Server.PerOp, h.Server.Top, h.Server.UsecOp, h.Server.ScriptsOp, fmtPct(h.Server.CPU/h.Seconds))
		if h.Server.ScriptsOp > 3 {
			fmt.Fprintf(&b, "A handoff needs a release and an acquire (2 EVALSHA); the other %.1f per handoff are acquire attempts that did not win and waiters' heartbeats. ", h.Server.ScriptsOp-2)
		}
		if m := hotKey(res, "relock", 0); p.Scenario == "spread" && m != nil {
			fmt.Fprintf(&b, "The same 32 waiters in %d processes: %s handoffs/s at %.2f EVALSHA and %.1f commands per handoff. ", m.Processes, fmtRate(m.HandoffsSec), m.Server.ScriptsOp, m.Server.PerOp)
		}
		if f := hotKey(res, "relock-fair", 0); p.Scenario == "hotkey" && f != nil {
			fmt.Fprintf(&b, "relock's fair lock posts %s handoffs/s at %.1f commands and %.2f EVALSHA per handoff with Jain %.2f. ", fmtRate(f.HandoffsSec), f.Server.PerOp, f.Server.ScriptsOp, f.Jain)
		}
		if rs := hotKey(res, "redsync", 0); p.Scenario == "hotkey" && rs != nil && rs.SwitchesSec >= 0 && h.SwitchesSec >= 0 {
			fmt.Fprintf(&b, "redsync's default posts %s handoffs/s but only %s switches/s between waiters (Jain %.2f): its releasing waiter takes the lock straight back while the others sleep 50–250 ms between tries; relock switches holders %s times a second (Jain %.2f).",
				fmtRate(rs.HandoffsSec), fmtRate(rs.SwitchesSec), rs.Jain, fmtRate(h.SwitchesSec), h.Jain)
		}
	}
	return b.String()
}

// missed names the targets that were measured and missed.
func missed(ts []Target) []string {
	var out []string
	for _, t := range ts {
		if t.Known && !t.Pass {
			out = append(out, t.Name)
		}
	}
	return out
}

func holdsOf(res *Results) []time.Duration {
	var holds []time.Duration
	for _, h := range res.HotKey {
		if !slices.Contains(holds, h.Hold) {
			holds = append(holds, h.Hold)
		}
	}
	return holds
}

func libraryVersions(mods map[string]string) string {
	v := func(path string) string {
		if s := mods[path]; s != "" {
			return s
		}
		return "?"
	}
	return fmt.Sprintf("relock (%s) and rueidislock on rueidis %s; go-redsync/redsync %s and bsm/redislock %s on go-redis %s; plots: gonum.org/v1/plot %s",
		v("github.com/relockgo/relock"), v("github.com/redis/rueidis"), v("github.com/go-redsync/redsync/v4"), v("github.com/bsm/redislock"),
		v("github.com/redis/go-redis/v9"), v("gonum.org/v1/plot"))
}

func plotLink(w *mdWriter, plots []plotFile, name string) {
	for _, p := range plots {
		if p.name == name {
			w.line("![%s](%s)", p.alt, p.file)
			w.text("")
		}
	}
}

func commandList(cmds map[string]int64, seconds float64) string {
	type kv struct {
		k string
		v int64
	}
	var list []kv
	for k, v := range cmds {
		list = append(list, kv{k, v})
	}
	slices.SortFunc(list, func(a, b kv) int {
		if a.v != b.v {
			return int(b.v - a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s %s/s", e.k, fmtRate(float64(e.v)/seconds)))
	}
	if len(parts) == 0 {
		return "no commands"
	}
	return strings.Join(parts, ", ")
}

// ratioAbove is (a − aIdle) ÷ (b − bIdle), rendered.
func ratioAbove(a, aIdle, b, bIdle float64) string {
	if b-bIdle <= 0 {
		return "–"
	}
	return fmtRatio((a - aIdle) / (b - bIdle))
}

// mdWriter accumulates markdown lines.
type mdWriter struct{ strings.Builder }

func (w *mdWriter) line(format string, args ...any) {
	fmt.Fprintf(w, format, args...)
	w.WriteByte('\n')
}

// text writes s as a line, verbatim.
func (w *mdWriter) text(s string) {
	w.WriteString(s)
	w.WriteByte('\n')
}

func (w *mdWriter) row(k, v string) { w.line("| %s | %s |", k, v) }

// cell makes s safe inside a table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// fmtDur renders d with three significant figures in a fitting unit.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.3g µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3g ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3g s", d.Seconds())
	}
}

// fmtRate renders a rate with three significant figures and a thousands
// separator.
func fmtRate(f float64) string {
	if f >= 1000 {
		s := fmt.Sprintf("%.0f", f)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		return b.String()
	}
	return fmt.Sprintf("%.3g", f)
}

func fmtRatio(f float64) string {
	if f > 0 && f < 0.1 {
		return "1/" + fmtRate(1/f)
	}
	if f >= 10 {
		return fmt.Sprintf("%.0f×", f)
	}
	return fmt.Sprintf("%.2f×", f)
}

func fmtPct(f float64) string {
	if f < 0.1 {
		return fmt.Sprintf("%.1f%%", 100*f)
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

func fmtHold(d time.Duration) string {
	if d == 0 {
		return "zero"
	}
	return d.String()
}

// targetsSection renders the targets: a short table to copy, then each
// target with the figures behind it, and how the new figures are taken.
func targetsSection(w *mdWriter, res *Results) {
	w.text("## Targets")
	w.text("")
	w.text("relock's performance targets, evaluated on this run: each is met (PASS) or missed (**MISS**), with the ratio measured; every figure comes from the tables below. *Previous* is the same target evaluated on the previous run's figures (see the top), where it had them. Group 8 is the many-processes and loss-notice targets: a handoff wakes one process however many wait, and a hold that another's call ended is told at once. This table can be copied as it is.")
	w.text("")
	prev := previousTargets(res)
	previous := func(t Target, figure func(Target) string) string {
		if p, ok := previousOf(prev, t); ok {
			return figure(p)
		}
		return "–"
	}
	w.text("| # | target | wanted | measured | | previous |")
	w.text("|---|---|---|---|---|---|")
	for _, t := range res.Targets {
		w.line("| %d | %s | %s | %s | %s | %s |", t.Issue, t.Short, t.Want, orDash(t.Brief), verdict(t), previous(t, func(p Target) string { return orDash(p.Brief) }))
	}
	w.text("")
	if misses := missed(res.Targets); len(misses) > 0 {
		w.line("relock misses %d of %d targets here.", len(misses), len(res.Targets))
		if len(res.Profiles) > 0 {
			w.text("See [Profiles](#profiles-where-relock-missed) for what relock's CPU profile shows where its mutex missed.")
		}
		w.text("")
	}
	w.text("<details><summary>Each target with the figures behind it</summary>")
	w.text("")
	w.text("| # | target | wanted | measured | | previous |")
	w.text("|---|---|---|---|---|---|")
	for _, t := range res.Targets {
		w.line("| %d | %s | %s | %s | %s | %s |", t.Issue, t.Name, t.Want, orDash(t.Got), verdict(t), previous(t, func(p Target) string { return orDash(p.Got) }))
	}
	w.text("")
	w.text("</details>")
	w.text("")
	w.text("How the figures the targets need are taken:")
	w.text("")
	w.line("- **Goroutine runs per op** (1): the count of the runtime/metrics histogram `%s` over the timed loop, times the runtime's sampling period (%d: it records one in %d of a goroutine's transitions into running), ÷ operations; the whole process, so the library's goroutines and its client's reader and writer goroutines count, as allocations do. The sampling makes both rows' estimates noisy, so the ratio is judged with a %.0f%% tolerance: it passes up to %.2f×.", schedMetric, schedSampling, schedSampling, 100*runsTolerance, targetRunsVsScripts+runsTolerance)
	w.line("- **PING floor** (2): the DisableAutoPipelining row (synchronous, on a pooled connection) is compared with the PING through rueidis's pipeline goroutines, as the target states it; against the synchronous PING (scenario 1 has both) two round trips make 2.0× the floor.")
	w.text("- **Redis µs/op** (3): the `INFO commandstats` usec of the commands the clients sent: `EVALSHA`'s own (which includes the commands its script runs), plus the commands sent directly, counted on the client (a rueidis wrapper, a go-redis hook), plus commands no script runs (transactions, `WAIT`, pub/sub, `PING`). Not the sum over all commands, which counts a script's commands twice.")
	w.line("- **FIFO violations** (4): every acquisition is stamped with the wall-clock time its waiter's first Lock call began and the time Lock returned (the processes share the machine's clock). A grant counts as a violation when another waiter, whose Lock call began at least %s before the granted waiter's, was still waiting (granted later, or not at all by the end of the row). The %s tolerance absorbs the clock reads and a library's attempt granularity. relock's kinds that serve waiters in arrival order, the fair lock and the semaphore (whose grants are in flight together: its Acquire calls return in another order than it granted), are counted on Redis's clock instead: their grants in the order of their fencing tokens, each wait dated by when its first attempt ran in Redis (the attempts' replies say), so that an attempt that reached Redis late — a stalled process, a busy socket — does not count as overtaken.", fmtDur(fifoTolerance), fmtDur(fifoTolerance))
	w.text("- **Fair wait max** (4): the longest wait over the 99th percentile, which shows a waiter that slept through its wake-up. A waiter that has just joined the lock's wake-up subscription takes its wake-up signal before it asks whether the subscription is live, so that a release (or the subscription's confirmation) landing between the two still wakes it (`TestFirstWaitMissesNoWakeUp` puts a release in that gap). The waits are bounded by construction besides: a release hands the lock to the first waiter and wakes it by name, and a waiter behind it sleeps no later than its deadline.")
	w.text("- **EVALSHA per handoff** (7): `EVALSHA` (and `EVAL`) calls in `INFO commandstats` ÷ acquisitions. An acquire attempt, a release and a waiter's heartbeat are one `EVALSHA` each, so EVALSHA/handoff − 1 is about the acquire attempts per handoff: a release that wakes one waiter gives about 2; one that wakes every waiter, about the number of waiters.")
	w.text("- **Processes woken per handoff** (8): each process's relock Client subscribes on dedicated connections of its rueidis client (`Dedicate`); the benchmark wraps that client so that the connections' pub/sub hooks count every message before relock's hook sees it, by channel: the lock's channel `P:{E}:wake` (broadcasts, which every process subscribed to the lock receives) and a Client's channel of the lock `P:{E}:wake:<client id>` (wake-ups that name an owner, which only that owner's process receives; loss notices there are counted apart and left out). Each message received wakes the process that receives it; the sum over the processes from the start line to the end of the row, ÷ handoffs, is the processes woken per handoff (a process that receives two messages for one handoff counts twice, so it bounds the processes woken from above). relock itself exposes no such count, and Redis's `INFO` counts `PUBLISH` calls (in `commandstats`), not the messages it delivers.")
	w.line("- **Loss notice latency** (8): see section 6b; %s force unlocks per kind in this run, the wanted p99 bound being the test's (`TestLossIsToldAtOnce`: 100 ms at the 99th percentile of 100 runs).", orDash(res.Durations["loss_samples"]))
	w.text("- **Previous** (every target): the results.json that this run's replaced in its output directory (with `-out results`, the published run as committed), read before this run began and kept in this run's results.json under `previous`; its targets are evaluated by this run's code, so a target it could not measure (a row it did not have) shows –.")
	w.line("- **Round trips per 100 renewals due** (6): the client's `Do`/`DoMulti` calls per second while holding, above idle, ÷ (leases ÷ the row's renewal interval ÷ 100); at relock's default %s lease, the rows of target 6, the interval is %s.", fmtDur(relock.DefaultWatchdogTimeout), fmtDur(renewEvery(relock.DefaultWatchdogTimeout)))
	w.text("")
}

func verdict(t Target) string {
	switch {
	case !t.Known:
		return "not measured"
	case t.Pass:
		return "PASS"
	}
	return "**MISS**"
}

// usecOp renders a row's Redis µs per op, or – where its clients did not
// count what they sent.
func usecOp(c ServerCost) string {
	if !c.UsecKnown {
		return "–"
	}
	return fmt.Sprintf("%.1f", c.UsecOp)
}

// hotKeyTable renders rows at hold, relock ÷ this against base.
func hotKeyTable(w *mdWriter, rows []HotKeyRow, base *HotKeyRow, hold, floor time.Duration) {
	w.text("| library | configuration | handoffs/s | switches/s | relock ÷ this | of ceiling | wait p50 | wait p99 | wait max | Jain | FIFO violations | acquisitions | failures | Redis commands/handoff | Redis CPU |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	ceiling := 0.0
	if floor > 0 {
		ceiling = 1 / (hold + 2*floor).Seconds()
	}
	for _, h := range rows {
		if h.Hold != hold {
			continue
		}
		if h.Err != "" {
			w.line("| %s | %s | unavailable: %s | | | | | | | | | | | | |", h.Name, h.Variant, cell(h.Err))
			continue
		}
		handoffs, switches, vsRelock, ofCeiling, fifo := fmtRate(h.HandoffsSec), "–", "–", "–", "–"
		if h.Reads+h.Writes > 0 {
			handoffs = fmt.Sprintf("%s (%s reads + %s writes)", handoffs, fmtRate(h.ReadsSec), fmtRate(h.WritesSec))
		}
		if h.SwitchesSec >= 0 {
			switches = fmtRate(h.SwitchesSec)
		}
		if h.FIFOViolations >= 0 {
			fifo = fmt.Sprint(h.FIFOViolations)
		}
		if base != nil && h.HandoffsSec > 0 {
			vsRelock = fmtRatio(base.HandoffsSec / h.HandoffsSec)
		}
		if ceiling > 0 && !h.Overlapping {
			ofCeiling = fmtPct(h.HandoffsSec / ceiling)
		}
		failures := fmt.Sprint(h.Failures)
		if h.Errors > 0 {
			failures += fmt.Sprintf(" (+%d errors: %s)", h.Errors, cell(h.FirstError))
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %d | %s | %.1f | %s |", h.Name, h.Variant, handoffs, switches, vsRelock, ofCeiling,
			fmtDur(h.WaitP50), fmtDur(h.WaitP99), fmtDur(h.WaitMax), h.Jain, fifo, h.Acquisitions, failures, h.Server.PerOp, fmtPct(h.Server.CPU/h.Seconds))
	}
	w.text("")
}

// spreadSection renders the hot key's waiters in many processes.
func spreadSection(w *mdWriter, res *Results) {
	if len(res.Spread) == 0 {
		return
	}
	s := res.Spread[0]
	w.line("### Hot key, zero hold, %d waiters in %d processes of %d", s.Workers, s.Processes, s.Workers/max(s.Processes, 1))
	w.text("")
	w.text("The same waiters as above, spread over many processes with a client each: a release that wakes one waiter per lock hands off as fast as with two processes, one that wakes a waiter per process (each process's client hears the release) loads Redis with an attempt per process and every process's CPU with a wake-up. relock's releases wake one waiter per lock: a hand-over names the waiter it grants the lock to (*EVALSHA/handoff* stays near 2) and goes on the channel of that waiter's Client for the lock, `P:{E}:wake:<client id>`, which only that process reads; broadcasts (a lock freed with nobody queued) go on the lock's channel, `P:{E}:wake`, to every process subscribed to it. *Processes woken/handoff* is the wake-up messages the processes' relock Clients received ÷ handoffs, with its named and broadcast parts (see Targets for how they are counted). *÷ 2 × 16* divides by the same kind's row at zero hold above, wait p99 by its wait p99; *previous* gives the previous run's figure (dated at the top) where it has the row, the ratio first. *Switches within a process* is the share of switches (grants to another waiter than the last holder, in the order of their times) that went to a waiter of the last holder's process: such a handoff wakes no other process, so a baseline in 2 processes, where about half the switches stay in one, costs fewer process wake-ups per handoff than a row where every switch crosses. *Client CPU/handoff* is the CPU time (user and system) of all the row's processes, from its start to their waiters' return, ÷ handoffs.")
	w.text("")
	shapeTable(w, res, res.Spread, spreadPair, "2 × 16", prevRows(res.Previous, func(p *Results) []HotKeyRow { return p.Spread }))
}

// waitersSection renders the hot key with 1 to 1,000 waiters.
func waitersSection(w *mdWriter, res *Results) {
	if len(res.Waiters) == 0 {
		return
	}
	w.text("## 5b. Waiters at scale")
	w.text("")
	w.line("One key, zero hold, 1 to %s waiters spread over up to %d processes (a client each), for relock's mutex, reentrant and fair locks. *EVALSHA/handoff* is `EVALSHA` and `EVAL` calls in `INFO commandstats` ÷ acquisitions: an acquire attempt, a release and a waiter's heartbeat are one `EVALSHA` each, so *EVALSHA/handoff − 1* is about the acquire attempts per handoff, the wake-up fan-out: a release that wakes one waiter gives about 2, one that wakes every waiter about the number of waiters. *÷ at %d* divides by the same kind's row with %d waiters.",
		fmtCount(slices.MaxFunc(res.Waiters, func(a, b HotKeyRow) int { return a.Workers - b.Workers }).Workers), waitersProcs, targetFanOutBase, targetFanOutBase)
	w.text("")
	w.text("| library | waiters | processes | handoffs/s | EVALSHA/handoff | EVALSHA/handoff − 1 | ÷ at 10 | Redis commands/handoff | wait p50 | wait p99 | Jain | FIFO violations | Redis CPU |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, h := range res.Waiters {
		if h.Err != "" || h.Acquisitions == 0 {
			w.line("| %s | %d | %d | unavailable: %s | | | | | | | | | |", h.Name, h.Workers, h.Processes, cell(orDash(h.Err)))
			continue
		}
		vsBase, fifo := "–", "–"
		if b := waitersAt(res, h.ID, targetFanOutBase); b != nil && b.Server.ScriptsOp > 0 {
			vsBase = fmtRatio(h.Server.ScriptsOp / b.Server.ScriptsOp)
		}
		if h.FIFOViolations >= 0 {
			fifo = fmt.Sprint(h.FIFOViolations)
		}
		w.line("| %s | %d | %d | %s | %.2f | %.2f | %s | %.1f | %s | %s | %.2f | %s | %s |", h.Name, h.Workers, h.Processes, fmtRate(h.HandoffsSec), h.Server.ScriptsOp, h.Server.ScriptsOp-1, vsBase,
			h.Server.PerOp, fmtDur(h.WaitP50), fmtDur(h.WaitP99), h.Jain, fifo, fmtPct(h.Server.CPU/h.Seconds))
	}
	w.text("")
}

// watchdogScaleSection renders relock's watchdog rows by number of leases.
func watchdogScaleSection(w *mdWriter, res *Results) {
	rows := watchdogScale(res)
	if len(rows) == 0 {
		return
	}
	w.text("### relock's watchdog at scale")
	w.text("")
	heldLoop := res.Durations["held_loop"]
	if heldLoop == "" {
		heldLoop = res.Durations["lock_loop"]
	}
	interval := renewEvery(relock.DefaultWatchdogTimeout)
	window, held := orDash(res.Durations["watchdog_scale_window"]), orDash(heldLoop)
	if d, err := time.ParseDuration(window); err == nil {
		switch {
		case d < interval:
			window += ", less than a renewal interval: it may hold no renewal"
		case d%interval == 0:
			window += fmt.Sprintf(", %d renewal intervals: %d renewals of every lease whatever their phase", d/interval, d/interval)
		default:
			window += ", not a whole number of renewal intervals: the renewals it holds depend on their phase"
		}
	}
	if d, err := time.ParseDuration(held); err == nil && d >= interval {
		held += ", at least one renewal interval: it runs beside a renewal of every lease"
	} else if err == nil {
		held += ", less than a renewal interval: it may run beside no renewal"
	}
	w.line("relock's mutex alone, in a process of its own holding each number of leases at relock's default lease, `relock.DefaultWatchdogTimeout` (%s, renewed every %s: no `WithWatchdogTimeout`), the setup target 6 is about; the comparison above runs at %s leases so that the libraries compare, which at 100,000 leases would be 100,000 renewals a second. Window: %s. *Taking* is the wall time to take them all from %d goroutines; *heap per lease* is `HeapAlloc` after a GC, after taking them less before, ÷ leases. *Lock+Unlock/s* is one goroutine locking and unlocking one more key on the same client: for %s before taking the leases and again for %s after releasing them (*none held* is the mean of the two, which bracket the loop with the leases held in time, so that the machine's drift over the row weighs on both sides), and after the window, while holding them, for %s. *Round trips per 100 due* divides the client's round trips per second above idle by the renewals due per second (leases ÷ the row's renewal interval, a third of its lease) ÷ 100.",
		fmtDur(relock.DefaultWatchdogTimeout), fmtDur(interval), fmtDur(watchdogTimeout), window, keepConcurrency, orDash(res.Durations["lock_loop"]), orDash(res.Durations["lock_loop"]), held)
	w.text("")
	w.text("| leases held | lease (renewed every) | lost | taking | heap per lease | Lock+Unlock/s, none held | with the leases held | held ÷ none | window | round trips/s above idle | renewals due/s | round trips per 100 due | Redis commands / lease / s | client CPU (idle) | Redis CPU (idle) |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, k := range rows {
		if k.Acquired == 0 {
			w.line("| %s | %s | unavailable: %s | | | | | | | | | | | | |", fmtCount(k.Leases), leaseCell(k), cell(k.Err))
			continue
		}
		ratio, per100, due := "–", "–", "–"
		none := "–"
		if n := k.NoneHeld(); n > 0 {
			ratio = fmt.Sprintf("%.2f×", k.LockUnlockHeld/n)
			none = fmtRate(n)
			if k.LockUnlockAfter > 0 {
				none += fmt.Sprintf(" (%s before, %s after)", fmtRate(k.LockUnlockIdle), fmtRate(k.LockUnlockAfter))
			}
		}
		if r, ok := tripsPer100Due(k); ok {
			per100 = fmt.Sprintf("%.3f", r)
			due = fmtRate(float64(k.Acquired) / k.RenewEvery.Seconds())
		}
		held := fmt.Sprintf("%s of %s", fmtRate(float64(k.Acquired)), fmtRate(float64(k.Leases)))
		w.line("| %s | %s | %d | %s | %s B | %s | %s | %s | %s | %s | %s | %s | %.2f | %s (%s) | %s (%s) |", held, leaseCell(k), k.Lost, fmtSeconds(k.AcquireSec), fmtRate(k.HeapPerLease),
			none, fmtRate(k.LockUnlockHeld), ratio, fmtSeconds(k.Held.Seconds), fmtRate(k.Held.RoundTripSec-k.Idle.RoundTripSec), due, per100,
			(k.Held.CommandsSec-k.Idle.CommandsSec)/float64(k.Acquired), fmtPct(k.Held.ClientCPU), fmtPct(k.Idle.ClientCPU), fmtPct(k.Held.RedisCPU), fmtPct(k.Idle.RedisCPU))
	}
	w.text("")
	for _, k := range rows {
		if k.Err != "" {
			w.line("%s leases: %s.", fmtCount(k.Leases), cell(k.Err))
			w.text("")
		}
	}
}

// leaseCell renders a watchdog row's lease and renewal interval.
func leaseCell(k WatchdogRow) string {
	lease := "–" // results written before the lease was recorded
	if k.Lease > 0 {
		lease = fmtDur(k.Lease)
	}
	return fmt.Sprintf("%s (%s)", lease, fmtDur(k.RenewEvery))
}

// goDuration writes d as Go source, as an option's argument would be:
// 3*time.Second.
func goDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d*time.Second", d/time.Second)
	}
	return fmt.Sprintf("%d*time.Millisecond", d/time.Millisecond)
}

// fmtSeconds renders a number of seconds as fmtDur does.
func fmtSeconds(s float64) string { return fmtDur(time.Duration(s * float64(time.Second))) }

// peer is a column of the summary against the peers: a library's row at
// its defaults, and the ID of its tuned row, if it has one.
type peer struct{ name, id, tuned string }

// peers are the summary's columns, in the order the README shows them.
var peers = []peer{
	{"bsm/redislock", "bsm", ""},
	{"go-redsync/redsync", "redsync", ""},
	{"rueidislock", "rueidislock", "rueidislock-1key"},
}

// peerMeasure is a row of the summary against the peers: a figure that
// relock's row (relock) and each peer's row have.
type peerMeasure struct {
	name   string
	relock string                  // relock's row
	get    func(id string) float64 // the row's figure; 0 where it is missing
	fmt    func(float64) string
	ids    map[string]string // peer name → its row here, where not its usual id
}

// ratio renders relock's figure base ÷ p's (and ÷ p's tuned row).
func (m peerMeasure) ratio(base float64, p peer) string {
	id, tuned := p.id, p.tuned
	if m.ids != nil {
		id, tuned = m.ids[p.name], ""
	}
	v := m.get(id)
	if id == "" || v == 0 {
		return "–"
	}
	s := fmtRatio(base / v)
	if t := m.get(tuned); tuned != "" && t != 0 {
		s += " (" + fmtRatio(base/t) + ")"
	}
	return s
}

// peersSection renders the summary of relock against its peers, one ratio
// per cell, in the shape the README quotes, so that the README's table is
// this one copied.
func peersSection(w *mdWriter, res *Results) {
	p50 := func(r *LatencyRow) float64 {
		if r == nil {
			return 0
		}
		return float64(r.P50)
	}
	hot := func(f func(*HotKeyRow) float64) func(string) float64 {
		return func(id string) float64 {
			if r := hotKey(res, id, 0); r != nil {
				return f(r)
			}
			return 0
		}
	}
	dur := func(f float64) string { return fmtDur(time.Duration(f)) }
	redlockP50 := func(id string) float64 {
		if res.Redlock == nil {
			return 0
		}
		for i := range res.Redlock.Uncontended {
			if r := &res.Redlock.Uncontended[i]; r.ID == id && r.Err == "" && r.N > 0 {
				return p50(r)
			}
		}
		return 0
	}
	renewTrips := func(id string) float64 {
		for _, k := range res.Watchdog {
			if k.ID == id && k.Renews && k.Acquired > 0 {
				return k.Held.RoundTripSec - k.Idle.RoundTripSec
			}
		}
		return 0
	}
	leases := 0
	for _, k := range res.Watchdog {
		if k.ID == "relock" {
			leases = k.Acquired
		}
	}
	ms := []peerMeasure{
		{name: "uncontended Lock+Unlock, p50 (lower is better)", relock: "relock", fmt: dur,
			get: func(id string) float64 { return p50(uncontended(res, id)) }},
		{name: "64 goroutines on distinct keys, ops/s", relock: "relock", fmt: fmtRate,
			get: func(id string) float64 {
				if r := distinct(res, id); r != nil {
					return r.OpsPerSec
				}
				return 0
			}},
		{name: "one hot key, 32 waiters, zero hold: handoffs/s", relock: "relock", fmt: fmtRate,
			get: hot(func(r *HotKeyRow) float64 { return r.HandoffsSec })},
		{name: "the same: handoffs/s to another waiter", relock: "relock", fmt: fmtRate,
			get: hot(func(r *HotKeyRow) float64 { return r.SwitchesSec })},
		{name: "the same: wait p99 (lower is better)", relock: "relock", fmt: dur,
			get: hot(func(r *HotKeyRow) float64 { return float64(r.WaitP99) })},
		{name: fmt.Sprintf("%s leases kept alive (%s lease): round trips/s (lower is better)", fmtRate(float64(leases)), fmtDur(watchdogTimeout)), relock: "relock", fmt: fmtRate,
			get: renewTrips},
		{name: "redlock over 5 masters: uncontended p50 (lower is better)", relock: "relock-redlock", fmt: dur,
			get: redlockP50, ids: map[string]string{"go-redsync/redsync": "redsync-redlock"}},
	}

	w.text("## relock against its peers")
	w.text("")
	w.text("relock's mutex (its redlock in the last row) against each peer at its defaults, from the tables below: each cell is relock's figure ÷ the peer's, so above 1× relock is ahead for rates and behind where lower is better; rueidislock tuned (KeyMajority 1, NoLoopTracking) in brackets; – where the peer has no such row (redsync and bsm/redislock do not renew leases). The README's performance table is this one, copied.")
	w.text("")
	head, rule := "| | relock", "|---|---"
	for _, p := range peers {
		head += " | ÷ " + p.name
		rule += "|---"
	}
	w.text(head + " |")
	w.text(rule + "|")
	for _, m := range ms {
		base := m.get(m.relock)
		if base == 0 {
			continue
		}
		row := fmt.Sprintf("| %s | %s", m.name, m.fmt(base))
		for _, p := range peers {
			row += " | " + m.ratio(base, p)
		}
		w.text(row + " |")
	}
	w.text("")
}
