package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
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
	w.row("durations", fmt.Sprintf("scenarios 1–3: %s per row; hot key: %s per row; watchdog: %s held after %s idle; whole run %s",
		res.Durations["uncontended"], res.Durations["hot_key"], res.Durations["watchdog_window"], res.Durations["watchdog_idle"], m.Elapsed))
	w.text("")
	w.text("Absolute figures drift between machines and runs; the ratios (relock ÷ peer, and figures over the PING round trip of scenario 1) are what to compare. Every library runs at its documented defaults; a *tuned* row uses the retry options the library offers. relock has no retry knobs: its waiters are woken by the release.")
	w.text("")

	w.text("## Targets")
	w.text("")
	w.text("The issue's targets for relock's plain mutex, evaluated on this run.")
	w.text("")
	w.text("| target | wanted | measured | |")
	w.text("|---|---|---|---|")
	for _, t := range res.Targets {
		verdict := "not measured"
		if t.Known {
			verdict = "**MISS**"
			if t.Pass {
				verdict = "PASS"
			}
		}
		w.line("| %s | %s | %s | %s |", t.Name, t.Want, orDash(t.Got), verdict)
	}
	w.text("")
	if misses := missed(res.Targets); len(misses) > 0 {
		w.line("relock misses %d of %d targets here: %s. See [Profiles](#profiles-where-relock-missed) for what relock's CPU profile shows in those scenarios.", len(misses), len(res.Targets), strings.Join(misses, "; "))
		w.text("")
	}

	w.text("## 1. Round-trip floor")
	w.text("")
	w.text("PING, one at a time, on one connection of each client, at its defaults.")
	w.text("")
	w.text("| client | used by | PING p50 | mean | PING p99 | samples |")
	w.text("|---|---|---|---|---|---|")
	for _, f := range res.Floor {
		users := "relock, rueidislock"
		switch f.Client {
		case "go-redis":
			users = "redsync, bsm/redislock"
		case clientBusy:
			users = "diagnostic: a goroutine spins on one core meanwhile"
		}
		if f.Err != "" {
			w.line("| %s | %s | error: %s | | | |", f.Client, users, cell(f.Err))
			continue
		}
		w.line("| %s | %s | %s | %s | %s | %d |", f.Client, users, fmtDur(f.P50), fmtDur(f.Mean), fmtDur(f.P99), f.N)
	}
	w.text("")
	if g := clientFloor(res, "go-redis"); g > 0 && floor > 0 {
		w.line("go-redis ÷ rueidis PING p50: %.2f×. **RTT** below is the rueidis PING p50, %s.", float64(g)/float64(floor), fmtDur(floor))
		w.text("")
	}
	if b := clientFloor(res, clientBusy); b > 0 && floor > 0 && b < floor {
		w.line("With one core kept busy, the same PING takes %s: %s of the round trip (%s) is the cost of waking an idle core. Such wake-ups are slow on virtual machines, and whether a round trip pays them depends on where the scheduler runs the client's threads and the server: go-redis reads the reply on the calling goroutine, so client and server can take turns on one core, while rueidis hands each command to its writer and reader goroutines, which may wake a thread on another core. Rows whose round trips pay the wake-up only some of the time have bimodal latencies, with p50 and mean far apart; compare their means too.",
			fmtDur(b), fmtPct(float64(floor-b)/float64(floor)), fmtDur(floor-b))
		w.text("")
	}

	w.text("## 2. Uncontended Lock+Unlock")
	w.text("")
	w.text("One goroutine locks and unlocks one key, again and again. *÷ PING* divides the p50 by the PING p50 of the library's own client. Allocations are `runtime.MemStats` deltas over the timed loop, per operation, for the whole process (the library's background goroutines included). Redis figures are `INFO` deltas per operation; commands include those a script runs (`SET`, `INCR`, `PUBLISH`… inside one `EVALSHA`).")
	w.text("")
	w.text("| library | configuration | p50 | mean | p99 | p50 ÷ PING | relock ÷ this (p50) | allocs/op | B/op | Redis commands/op | Redis µs/op |")
	w.text("|---|---|---|---|---|---|---|---|---|---|---|")
	base := uncontended(res, "relock")
	for _, u := range res.Uncontended {
		if u.Err != "" {
			w.line("| %s | %s | unavailable: %s | | | | | | | | |", u.Name, u.Variant, cell(u.Err))
			continue
		}
		vsFloor, vsRelock := "–", "–"
		if f := clientFloor(res, u.Client); f > 0 {
			vsFloor = fmt.Sprintf("%.2f×", float64(u.P50)/float64(f))
		}
		if base != nil && u.P50 > 0 {
			vsRelock = fmt.Sprintf("%.2f", float64(base.P50)/float64(u.P50))
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f | %.1f (%s) | %.1f |", u.Name, u.Variant, fmtDur(u.P50), fmtDur(u.Mean), fmtDur(u.P99), vsFloor, vsRelock,
			u.Allocs, u.Bytes, u.Server.PerOp, u.Server.Top, u.Server.UsecOp)
	}
	w.text("")

	plotLink(&w, plots, "uncontended")

	w.text("## 3. 64 goroutines on distinct keys")
	w.text("")
	w.text("64 goroutines share one client of the library; each locks and unlocks a key of its own. *× RTT* is operations per second times the RTT: how many Lock+Unlock pairs complete per PING round-trip time.")
	w.text("")
	w.text("| library | configuration | ops/s | relock ÷ this | × RTT | p50 | p99 | Redis commands/op | Redis CPU | failed |")
	w.text("|---|---|---|---|---|---|---|---|---|---|")
	dbase := distinct(res, "relock")
	for _, d := range res.Distinct {
		if d.Ops == 0 {
			w.line("| %s | %s | unavailable: %s | | | | | | | |", d.Name, d.Variant, cell(d.Err))
			continue
		}
		vsRelock := "–"
		if dbase != nil {
			vsRelock = fmt.Sprintf("%.2f", dbase.OpsPerSec/d.OpsPerSec)
		}
		w.line("| %s | %s | %s | %s | %.2f | %s | %s | %.1f | %s | %d |", d.Name, d.Variant, fmtRate(d.OpsPerSec), vsRelock, d.OpsPerSec*floor.Seconds(),
			fmtDur(d.P50), fmtDur(d.P99), d.Server.PerOp, fmtPct(d.Server.CPU/d.Seconds), d.Failed)
	}
	w.text("")
	plotLink(&w, plots, "distinct")

	w.text("## 4–5. One hot key, 32 waiters in 2 processes")
	w.text("")
	w.text("Two processes, each with one client of the library and 16 waiters, take the same key in a loop: lock, hold (zero or 1 ms), unlock, lock again. A *handoff* is an acquisition; *switches* counts those by a different waiter than the previous holder (a library can post a high handoff rate by letting one waiter re-take the lock it just released). *Wait* runs from a waiter's first Lock call to the one that succeeds; waits still open when the row ends count with their length so far. *Jain* is Jain's fairness index over the 32 waiters' acquisitions (1: equal shares; 1/32 ≈ 0.03: one waiter took everything). *Failures* are Lock calls that gave up by design (a single try, or tries exhausted) — the waiter called Lock again at once. *Of ceiling* divides handoffs/s by 1/(hold + 2·RTT), the rate if each handoff cost only a release and an acquire round trip. relock's fair lock and read-write lock (90% RLock, 10% Lock; read holds overlap, so switches are not counted) are in the same table.")
	w.text("")
	for _, hold := range holdsOf(res) {
		w.line("### Hold %s", fmtHold(hold))
		w.text("")
		w.text("| library | configuration | handoffs/s | switches/s | relock ÷ this | of ceiling | wait p50 | wait p99 | wait max | Jain | acquisitions | failures | Redis commands/handoff | Redis CPU |")
		w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		hbase := hotKey(res, "relock", hold)
		ceiling := 0.0
		if floor > 0 {
			ceiling = 1 / (hold + 2*floor).Seconds()
		}
		for _, h := range res.HotKey {
			if h.Hold != hold {
				continue
			}
			if h.Err != "" {
				w.line("| %s | %s | unavailable: %s | | | | | | | | | | | |", h.Name, h.Variant, cell(h.Err))
				continue
			}
			switches, vsRelock, ofCeiling := "–", "–", "–"
			if h.SwitchesSec >= 0 {
				switches = fmtRate(h.SwitchesSec)
			}
			if hbase != nil && h.HandoffsSec > 0 {
				vsRelock = fmtRatio(hbase.HandoffsSec / h.HandoffsSec)
			}
			if ceiling > 0 && !h.Overlapping {
				ofCeiling = fmtPct(h.HandoffsSec / ceiling)
			}
			failures := fmt.Sprint(h.Failures)
			if h.Errors > 0 {
				failures += fmt.Sprintf(" (+%d errors: %s)", h.Errors, cell(h.FirstError))
			}
			w.line("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %d | %s | %.1f | %s |", h.Name, h.Variant, fmtRate(h.HandoffsSec), switches, vsRelock, ofCeiling,
				fmtDur(h.WaitP50), fmtDur(h.WaitP99), fmtDur(h.WaitMax), h.Jain, h.Acquisitions, failures, h.Server.PerOp, fmtPct(h.Server.CPU/h.Seconds))
		}
		w.text("")
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

	w.text("## 6. Watchdog cost")
	w.text("")
	w.text("A process of its own takes N leases of distinct names and keeps them for the window, with a 3 s lease renewed every second (relock: `WithWatchdogTimeout(3*time.Second)`; rueidislock: `KeyValidity` 3 s, `ExtendInterval` 1 s). *Idle* is the same process with its client open and nothing held, measured first. Commands and Redis CPU are `INFO` deltas; round trips are the `Do` and `DoMulti` calls the library made on its rueidis client (rueidis may write concurrent calls to the socket together, so this counts what the library asks for); client CPU is `getrusage(RUSAGE_SELF)`, as a share of one core.")
	w.text("")
	w.text("| library | configuration | leases held | lost | Redis commands/s (idle) | round trips/s (idle) | client CPU (idle) | Redis CPU (idle) | commands / lease / s | round trips / lease / s |")
	w.text("|---|---|---|---|---|---|---|---|---|---|")
	var wbase *WatchdogRow
	for i := range res.Watchdog {
		if res.Watchdog[i].ID == "relock" && res.Watchdog[i].Err == "" {
			wbase = &res.Watchdog[i]
		}
	}
	for _, k := range res.Watchdog {
		if !k.Renews {
			w.line("| %s | | – | – | %s | | | | | |", k.Name, k.Note)
			continue
		}
		if k.Acquired == 0 {
			w.line("| %s | %s | unavailable: %s | | | | | | | |", k.Name, k.Variant, cell(k.Err))
			continue
		}
		held := fmt.Sprintf("%d of %d", k.Acquired, k.Leases)
		n := float64(k.Acquired)
		w.line("| %s | %s | %s | %d | %s (%s) | %s (%s) | %s (%s) | %s (%s) | %.2f | %.4f |", k.Name, k.Variant, held, k.Lost,
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

	if len(res.Profiles) > 0 {
		w.text("## Profiles where relock missed")
		w.text("")
		w.text("For each scenario where relock missed a target, relock's row was run again under the CPU profiler (`runtime/pprof`; in the hot-key scenario, in the first of the two processes). The figures of that second run are not in the tables above. Open a profile with `go tool pprof -http=: <file>`.")
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
	w.text("- One binary runs everything against the same Redis; the hot-key rows re-execute it as two child processes, which print their figures as JSON for the parent to merge, and the watchdog rows run in a child process so that its CPU is the library's alone.")
	w.text("- Every library gets its own client connection(s) at the client's defaults (rueidis: auto-pipelining on one connection; go-redis: a pool of 10 connections per core). A lock value is made for every Lock call, as a user with a dynamic key would (relock's `mutex.New` and the others are cheap; redsync's Mutex carries its value and cannot be shared).")
	w.text("- bsm/redislock has no default TTL; it gets 8 s, redsync's default expiry. relock and rueidislock renew their leases themselves.")
	w.text("- Latencies are nearest-rank percentiles of every operation (up to a cap per row); throughput is operations over the wall time of the row.")
	w.text("- Redis figures are `INFO` deltas taken around each row (the `INFO` itself is subtracted); on a shared Redis (`-redis`) they include other clients' traffic.")
	return w.String()
}

// profileSection renders one profile and what it shows.
func profileSection(w *mdWriter, res *Results, p ProfileSummary) {
	title := map[string]string{"uncontended": "Uncontended Lock+Unlock", "distinct": "64 goroutines on distinct keys", "hotkey": "Hot key, zero hold"}[p.Scenario]
	w.line("### %s", title)
	w.text("")
	var names []string
	for _, t := range res.Targets {
		if t.Scenario == p.Scenario && t.Known && !t.Pass {
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
		"Go's context, time and sync code %s (relock makes contexts for every lease: one canceled with a cause, an AfterFunc link to its hold, and a timeout for the release). ",
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
		fmt.Fprintf(&b, "The profile is of CPU, while the miss is one of latency: the client is idle most of each operation, waiting on two round trips. ")
		if alone != nil {
			fmt.Fprintf(&b, "relock's two scripts called alone, through the same client and without the engine, take %s at p50 (%.2f× PING) and %s on average; relock takes %s and %s. ",
				fmtDur(alone.P50), float64(alone.P50)/float64(floor), fmtDur(alone.Mean), fmtDur(u.P50), fmtDur(u.Mean))
			if d := u.Mean - alone.Mean; d > 0 {
				fmt.Fprintf(&b, "The engine (lease, context and watchdog bookkeeping, and the goroutine wake-ups it causes) adds %s on average, with %.0f allocations (%.0f B) per Lock+Unlock against %.0f (%.0f B) for the scripts alone; ",
					fmtDur(d), u.Allocs, u.Bytes, alone.Allocs, alone.Bytes)
			} else {
				fmt.Fprintf(&b, "The engine adds no latency that this machine can resolve, though it makes %.0f allocations (%.0f B) per Lock+Unlock against %.0f (%.0f B) for the scripts alone; ",
					u.Allocs, u.Bytes, alone.Allocs, alone.Bytes)
			}
			fmt.Fprintf(&b, "the scripts alone are already at %.2f× PING, so the miss comes from the two Lua round trips themselves. ", float64(alone.P50)/float64(floor))
		}
		fmt.Fprintf(&b, "On Redis, a relock Lock+Unlock runs %.0f commands in %.1f µs of server time (%s)", u.Server.PerOp, u.Server.UsecOp, u.Server.Top)
		if bsm != nil {
			fmt.Fprintf(&b, ", where bsm/redislock runs %.0f in %.1f µs: the fencing token (INCR, TIME, SET) and the wake-up PUBLISH are work the peers do not do", bsm.Server.PerOp, bsm.Server.UsecOp)
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
		fmt.Fprintf(&b, "Redis was busy %s of the time at %.1f µs of server time per operation (%s). ", fmtPct(d.Server.CPU/d.Seconds), d.Server.UsecOp, d.Server.Top)
		if d.Server.CPU/d.Seconds > 0.8 {
			b.WriteString("The single-threaded server is near saturation: throughput is bound by the scripts' cost on Redis, heavier than the peers' (see the commands per operation above).")
		} else {
			fmt.Fprintf(&b, "With %d cores, the client's CPU competes with Redis for the same cores: the client work per operation (above) and the scripts' server time (heavier than the peers', see the commands per operation) together set the throughput.", res.Meta.Cores)
		}
	case "hotkey":
		h := hotKey(res, "relock", 0)
		if h == nil {
			break
		}
		fmt.Fprintf(&b, "On Redis each handoff cost %.1f commands (%s) and %.1f µs of server time; Redis was busy %s of the time. ", h.Server.PerOp, h.Server.Top, h.Server.UsecOp, fmtPct(h.Server.CPU/h.Seconds))
		if u := uncontended(res, "relock"); u != nil && u.Server.PerOp > 0 && h.Server.PerOp > 2*u.Server.PerOp {
			fmt.Fprintf(&b, "An uncontended Lock+Unlock costs %.0f: the rest, about %.0f commands per handoff, is failed attempts. A release wakes every waiter of a plain mutex and all but one of them retry in vain (a thundering herd), which loads both the server and the clients' cores. ",
				u.Server.PerOp, h.Server.PerOp-u.Server.PerOp)
		}
		if f := hotKey(res, "relock-fair", 0); f != nil {
			fmt.Fprintf(&b, "relock's fair lock, whose release wakes only the next waiter, posts %s handoffs/s at %.1f commands per handoff with Jain %.2f. ", fmtRate(f.HandoffsSec), f.Server.PerOp, f.Jain)
		}
		if rs := hotKey(res, "redsync", 0); rs != nil && rs.SwitchesSec >= 0 && h.SwitchesSec >= 0 {
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
