package main

import (
	"fmt"

	"github.com/relockgo/relock"
)

// The report's sections on many processes waiting on one lock (the
// spread and pod shapes, whose table spreadSection shares, and the ring,
// their floor without a lock), on the loss
// notice, and the previous run's figures beside this run's.

// podsSection renders the pod shape, one waiter in each of many processes,
// and its baseline.
func podsSection(w *mdWriter, res *Results) {
	pod, base := podShapesOf(res)
	if pod == nil {
		return
	}
	baseName, baseProcs := "–", "fewer processes"
	if base != nil {
		baseName = fmt.Sprintf("%d × %d", base.Processes, base.Workers/max(base.Processes, 1))
		baseProcs = fmt.Sprintf("%d processes", base.Processes)
	}
	w.line("### Hot key, zero hold, %d processes of 1 waiter (the pod shape)", pod.Processes)
	w.text("")
	w.line("The usual production shape: many processes (pods), each with one worker on the lock. Each kind runs its %d waiters in %s first, then, in the same run, in %d processes of one; *÷ %s* divides the second row by the first. The other columns are as in the table above.",
		pod.Workers, baseProcs, pod.Processes, baseName)
	w.text("")
	shapeTable(w, res, res.Pods, pods, baseName, prevRows(res.Previous, func(p *Results) []HotKeyRow { return p.Pods }))
}

// ringSection renders the ring, the spread and pod shapes' floor with no
// lock, beside relock's mutex in the same shapes.
func ringSection(w *mdWriter, res *Results) {
	if len(res.Ring) == 0 {
		return
	}
	w.text("### Floor of many processes: a token ring, no lock")
	w.text("")
	w.text("How much a handoff to another process costs on this machine alone: the same waiters, as workers (goroutines) in the same processes, pass one token around a ring, each to the next by a `PUBLISH` on the channel of the next one's process, whose rueidis client alone is subscribed to it (as a relock Client to its wake-up channel) and hands the token to the worker's goroutine, which passes it on at once; worker i runs in process i mod P, so every pass wakes another process. *÷ 2 × N* divides by the ring with as many workers in 2 processes; *relock ÷ 2 × N* is the mutex's handoffs/s in that shape ÷ its handoffs/s in 2 processes, from the tables above: where it is near the ring's ratio, the drop is the machine's wake-ups, not relock's. *Pass p50/p99* run from just before the `PUBLISH` to the receiving goroutine holding the token. A lock's releaser does more than pass: the worker that released asks for the lock again, a round trip that tells Redis it waits (relock's acquire attempt, which queues it), while the next holder's process wakes. In the rows *+ rejoin*, each worker, once it passed the token, makes that round trip (a `PING`) before it waits again: the floor of a handoff in which the releaser queues again; they are divided by the rejoin ring in 2 processes. *Client CPU/pass* is the CPU time of all the row's processes ÷ passes, as the hot-key tables' client CPU/handoff.")
	w.text("")
	w.text("| processes × workers | each pass | passes/s | ÷ 2 × N | pass p50 | pass p99 | client CPU/pass | relock ÷ 2 × N |")
	w.text("|---|---|---|---|---|---|---|---|")
	for _, g := range res.Ring {
		shape := fmt.Sprintf("%d × %d", g.Processes, g.Workers/max(g.Processes, 1))
		pass := "`PUBLISH`"
		if g.Rejoin {
			pass = "`PUBLISH` + rejoin (`PING`)"
		}
		if g.Err != "" {
			w.line("| %s | %s | unavailable: %s | | | | | |", shape, pass, cell(g.Err))
			continue
		}
		vsBase := "–"
		if b := ringBase(res, g); b != nil {
			vsBase = fmtRatio(g.PassesSec / b.PassesSec)
		}
		cpu := "–"
		if c := g.cpuPerPass(); c > 0 {
			cpu = fmtDur(c)
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %s |", shape, pass, fmtRate(g.PassesSec), vsBase, fmtDur(g.PassP50), fmtDur(g.PassP99), cpu, relockShapeRatio(res, g))
	}
	w.text("")
}

// ringBase returns the ring row g is compared with: as many workers in 2
// processes, passing as g does, when g has more processes.
func ringBase(res *Results, g RingRow) *RingRow {
	for i := range res.Ring {
		if b := &res.Ring[i]; b.Err == "" && b.PassesSec > 0 && b.Workers == g.Workers && b.Rejoin == g.Rejoin && b.Processes == 2 && g.Processes > 2 {
			return b
		}
	}
	return nil
}

// relockShapeRatio is relock's mutex's handoffs/s in g's shape (a spread
// or pod-shape row) ÷ its handoffs/s in that row's baseline, or "–".
func relockShapeRatio(res *Results, g RingRow) string {
	for _, pair := range []func(*Results, string) (row, base *HotKeyRow){spreadPair, pods} {
		r, b := pair(res, "relock")
		if r != nil && b != nil && b.HandoffsSec > 0 && r.Processes == g.Processes && r.Workers == g.Workers {
			return fmtRatio(r.HandoffsSec / b.HandoffsSec)
		}
	}
	return "–"
}

// podShapesOf returns the first pod-shape row of res and its baseline.
func podShapesOf(res *Results) (pod, base *HotKeyRow) {
	for _, h := range res.Pods {
		if p, b := pods(res, h.ID); p != nil {
			return p, b
		}
	}
	return nil, nil
}

// podProcsText says how many processes the pod shape ran in.
func podProcsText(res *Results) string {
	if pod, _ := podShapesOf(res); pod != nil {
		return fmt.Sprintf("%d in the pod shape", pod.Processes)
	}
	return "many in the pod shape"
}

// sameShape returns the row among rows of h's library and shape.
func sameShape(rows []HotKeyRow, h HotKeyRow) *HotKeyRow {
	for i := range rows {
		if r := &rows[i]; r.ID == h.ID && r.Processes == h.Processes && r.Workers == h.Workers && r.Hold == h.Hold && r.Err == "" && r.Acquisitions > 0 {
			return r
		}
	}
	return nil
}

// previousBase returns the baseline that pair gives for p in the previous
// run prev, when p is the row pair compares there and the baseline has
// figures to divide by.
func previousBase(prev *Results, pair func(*Results, string) (row, base *HotKeyRow), p *HotKeyRow) *HotKeyRow {
	if prev == nil {
		return nil
	}
	r, b := pair(prev, p.ID)
	if r == nil || r.Processes != p.Processes || r.Workers != p.Workers || b == nil || b.HandoffsSec <= 0 || b.WaitP99 <= 0 {
		return nil
	}
	return b
}

// spreadPair returns id's 16 × 2 row and the 2 × 16 row it is compared
// with (pods is the pod shape's).
func spreadPair(res *Results, id string) (row, base *HotKeyRow) {
	return spread(res, id), hotKey(res, id, 0)
}

// prevRows returns the rows rows picks from the previous run, or nil.
func prevRows(prev *Results, rows func(*Results) []HotKeyRow) []HotKeyRow {
	if prev == nil {
		return nil
	}
	return rows(prev)
}

// shapeTable renders rows of the hot key in other shapes. A row that pair
// gives as its kind's measured row (not its baseline) is compared with the
// baseline pair gives, named baseName; previous are the previous run's
// rows of the same table, where the row of the same kind and shape gives
// the previous figures.
func shapeTable(w *mdWriter, res *Results, rows []HotKeyRow, pair func(*Results, string) (row, base *HotKeyRow), baseName string, previous []HotKeyRow) {
	w.line("| library | configuration | processes × waiters | handoffs/s | ÷ %s | previous | wait p50 | wait p99 | ÷ %s | previous | wait max | switches/s | Jain | FIFO violations | Redis commands/handoff | previous | EVALSHA/handoff | processes woken/handoff (named + broadcast) | switches within a process | client CPU/handoff | Redis CPU |", baseName, baseName)
	w.text("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, h := range rows {
		shape := fmt.Sprintf("%d × %d", h.Processes, h.Workers/max(h.Processes, 1))
		if h.Err != "" {
			w.line("| %s | %s | %s | unavailable: %s | | | | | | | | | | | | | | | | | |", h.Name, h.Variant, shape, cell(h.Err))
			continue
		}
		vsBase, prevVs, waitVs, prevWait, prevCmds, switches, fifo, wakes := "–", "–", "–", "–", "–", "–", "–", "–"
		r, b := pair(res, h.ID)
		measured := r != nil && r.Processes == h.Processes && r.Workers == h.Workers
		if measured && b != nil && b.HandoffsSec > 0 && b.WaitP99 > 0 {
			vsBase = fmtRatio(h.HandoffsSec / b.HandoffsSec)
			waitVs = fmtRatio(float64(h.WaitP99) / float64(b.WaitP99))
		}
		if p := sameShape(previous, h); p != nil {
			prevVs, prevWait, prevCmds = fmtRate(p.HandoffsSec), fmtDur(p.WaitP99), fmt.Sprintf("%.1f", p.Server.PerOp)
			if pb := previousBase(res.Previous, pair, p); measured && pb != nil {
				prevVs = fmtRatio(p.HandoffsSec/pb.HandoffsSec) + " (" + prevVs + ")"
				prevWait = fmtRatio(float64(p.WaitP99)/float64(pb.WaitP99)) + " (" + prevWait + ")"
			}
		}
		if h.SwitchesSec >= 0 {
			switches = fmtRate(h.SwitchesSec)
		}
		if h.FIFOViolations >= 0 {
			fifo = fmt.Sprint(h.FIFOViolations)
		}
		if n, ok := h.WokenPerHandoff(); ok {
			acq := float64(h.Acquisitions)
			wakes = fmt.Sprintf("%.2f (%.2f + %.2f)", n, float64(h.WakeUps.Named)/acq, float64(h.WakeUps.Broadcast)/acq)
		}
		local, cpu := "–", "–"
		if h.InProcess != nil {
			local = fmtPct(*h.InProcess)
		}
		if c := h.cpuPerHandoff(); c > 0 {
			cpu = fmtDur(c)
		}
		w.line("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %.1f | %s | %.2f | %s | %s | %s | %s |", h.Name, h.Variant, shape, fmtRate(h.HandoffsSec), vsBase, prevVs,
			fmtDur(h.WaitP50), fmtDur(h.WaitP99), waitVs, prevWait, fmtDur(h.WaitMax), switches, h.Jain, fifo, h.Server.PerOp, prevCmds, h.Server.ScriptsOp, wakes, local, cpu, fmtPct(h.Server.CPU/h.Seconds))
	}
	w.text("")
}

// lossSection renders the loss notice's latency.
func lossSection(w *mdWriter, res *Results) {
	if len(res.Loss) == 0 {
		return
	}
	w.text("## 6b. Loss notice: from ForceUnlock to the holder's Context")
	w.text("")
	w.line("A relock call that ends a hold not its caller's (here `ForceUnlock` from another Client) publishes a loss notice to the holder's Client, which cancels the hold's `lease.Context()` with cause `relock.ErrLockLost` at once; without the notice (pub/sub delivers at most once) the holder learns at its next renewal, up to lease/3 later. Method, as `TestLossIsToldAtOnce` (root package) measures it: a holder Client and an admin Client, each on a rueidis client of its own, in the benchmark's process, at relock's default lease (%s, renewed every %s). The holder keeps a hold of another lock of the same kind for the whole row, so that its Client listens for notices throughout, and the row starts once that subscription (a `PSUBSCRIBE`) is confirmed on the Client's connection; then, for each sample, the holder takes the lock and the time runs from just before the admin calls `ForceUnlock`, its round trip included, until the holder's `lease.Context()` is done, whose cause must match `ErrLockLost`. *Late* counts samples over %s: their notice was lost and a renewal found the loss. *Notices received* counts the loss notices the holder's Client received. The semaphore's holder holds one permit of 8; its `ForceUnlock` frees every permit and tells each holder.",
		fmtDur(relock.DefaultWatchdogTimeout), fmtDur(renewEvery(relock.DefaultWatchdogTimeout)), fmtDur(lossLate))
	w.text("")
	w.text("| lock | configuration | lease | force unlocks | p50 | p99 | max | late | notices received | previous p50 / p99 |")
	w.text("|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range res.Loss {
		prev := "–"
		if res.Previous != nil {
			if p := lossOf(res.Previous, l.ID); p != nil && p.N > 0 {
				prev = fmtDur(p.P50) + " / " + fmtDur(p.P99)
			}
		}
		if l.N == 0 {
			w.line("| %s | %s | %s | unavailable: %s | | | | | | %s |", lossName(l.Lib), l.Variant, fmtDur(l.Lease), cell(orDash(l.Err)), prev)
			continue
		}
		late := fmt.Sprint(l.Late)
		if l.Err != "" {
			late += " (error: " + cell(l.Err) + ")"
		}
		w.line("| %s | %s | %s | %d | %s | %s | %s | %s | %d | %s |", lossName(l.Lib), l.Variant, fmtDur(l.Lease), l.N, fmtDur(l.P50), fmtDur(l.P99), fmtDur(l.Max), late, l.Notices, prev)
	}
	w.text("")
}

// previousCell says which run the report's previous columns are from.
func previousCell(p *Results) string {
	if p == nil {
		return "none: the output directory held no results.json of a run of this kind (smoke or not) before this one; the *previous* columns are empty"
	}
	commit := ""
	if p.Meta.Relock != "" {
		commit = ", commit " + p.Meta.Relock
	}
	return fmt.Sprintf("%s%s, `%s`: the results.json this run replaced; its figures are in the *previous* columns, its targets evaluated as this run's are", p.Meta.Date.Format("2006-01-02 15:04 MST"), commit, p.Meta.Command)
}
