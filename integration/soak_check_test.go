package integration

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// Bounds of the checker. Each is generous for a loaded 2-core machine
// running the race detector; each is far below what the bug it catches
// costs (seconds).
const (
	soakTolerance = 2 * time.Millisecond   // cross-process clock comparisons (see TestSoak)
	soakFIFOSlack = 200 * time.Millisecond // a fair Lock called this much earlier arrived earlier
	soakStall     = 500 * time.Millisecond // longest time a lock may stay free with a Lock waiting, in calm windows
	soakClosedMax = time.Second            // Lock on a closed rueidis client returns ErrClosed within this
	soakHandOn    = 250 * time.Millisecond // expiry probe: from a lease's end to the next grant
)

// soakCall is one Lock call of a worker ("lock" record).
type soakCall struct {
	kind, mode          string
	worker, gid         int
	call, deadline, ret int64
	outcome             string
	token               int64
	valid, end          int64 // ValidUntil at ret; end of the hold by its own view (0 if none)
	cause               string
	acc, stale, lost    int
}

func (c *soakCall) held() bool { return c.outcome == "ok" && c.end > c.ret }

// soakResult is the checker's verdict.
type soakResult struct {
	violations []string
	notes      []string
	stats      map[string]*soakStats
}

type soakStats struct {
	acquired, losses, stale, overruns, violations int
	maxWait                                       time.Duration
}

// note records what the checker excused, for the summary.
func (r *soakResult) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *soakResult) violate(kind, format string, args ...any) {
	if s := r.stats[kind]; s != nil {
		s.violations++
	}
	r.violations = append(r.violations, kind+": "+fmt.Sprintf(format, args...))
}

// table renders the per-kind summary.
func (r *soakResult) table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tacquisitions\tlosses\tstale rejections\tmax wait\toverruns\tviolations\t")
	for _, k := range append(slices.Clone(soakKinds), "other") {
		s := r.stats[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%d\t%d\t\n", k, s.acquired, s.losses, s.stale, s.maxWait.Round(time.Millisecond), s.overruns, s.violations)
	}
	tw.Flush()
	return b.String()
}

// soakWorkerLog is what one worker recorded besides its Lock calls.
type soakWorkerLog struct {
	stops   []int64 // phase ends: Lock ctxs canceled
	records []string
}

// checkSoak reads the workers' logs and checks them against what the test
// did. store holds the fenced store's counters per lock name.
func checkSoak(t *testing.T, logs []string, ev *soakEvents, store map[string]map[string]int64, soakOverrun time.Duration) *soakResult {
	t.Helper()
	res := &soakResult{stats: map[string]*soakStats{"other": {}}}
	for _, k := range soakKinds {
		res.stats[k] = &soakStats{}
	}
	var calls []*soakCall
	stops := map[int][]int64{}
	var other [][]string
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 1<<20), 1<<24)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			switch {
			case len(fields) == 0:
			case fields[0] == "lock":
				c, err := parseSoakCall(fields[1:])
				if err != nil {
					t.Fatalf("soak: %s: %v: %q", path, err, s.Text())
				}
				calls = append(calls, c)
			case fields[0] == "stop":
				stops[soakInt(fields[1])] = append(stops[soakInt(fields[1])], int64(soakInt(fields[2])))
			default:
				other = append(other, append(fields, s.Text()))
			}
		}
		f.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls) == 0 {
		t.Fatal("soak: the workers recorded no Lock call")
	}

	lags := map[int][]soakSpan{} // worker → stretches its goroutines could not run
	for _, f := range other {
		if f[0] == "lag" {
			at, late := int64(soakInt(f[2])), int64(soakInt(f[3]))
			lags[soakInt(f[1])] = append(lags[soakInt(f[1])], soakSpan{at - late, at})
		}
	}
	// lagged reports whether worker's goroutines were held up for at least
	// d of the stretch from..to: the machine, not relock, then explains a
	// delay of d there.
	lagged := func(worker int, from, to int64, d time.Duration) bool {
		for _, l := range lags[worker] {
			if time.Duration(min(l.to, to)-max(l.from, from)) >= d {
				return true
			}
		}
		return false
	}
	excused := 0

	paused := func(worker int, from, to int64) bool {
		for _, p := range ev.pauses[worker] {
			if p.from <= to+int64(soakOverrun) && p.to >= from-int64(soakOverrun) {
				return true
			}
		}
		return false
	}

	// Per call: stats, overruns, expired leases.
	byName := map[string][]*soakCall{}
	for _, c := range calls {
		st := res.stats[c.kind]
		if c.outcome == "ok" {
			st.acquired++
			st.maxWait = max(st.maxWait, time.Duration(c.ret-c.call))
			if c.cause == "lost" {
				st.losses++
			}
			st.stale += c.stale
			byName[soakLockName(c.kind)] = append(byName[soakLockName(c.kind)], c)
		}
		if c.lost > 0 {
			res.violate(c.kind, "worker %d: %d fenced writes accepted that lost an update (token %d, %s)", c.worker, c.lost, c.token, ev.during(c.ret))
		}
		end := max(c.deadline, c.call) // a ctx already done at the call: Lock must return at once
		for _, s := range stops[c.worker] {
			if s >= c.call && s < end {
				end = s
			}
		}
		over := time.Duration(c.ret - end)
		if over > soakOverrun && lagged(c.worker, end, c.ret, over-soakOverrun) {
			excused++
			continue
		}
		if over > soakOverrun && !paused(c.worker, c.call, c.ret) {
			st.overruns++
			res.violate(c.kind, "worker %d: Lock (%s, %s) returned %v after its ctx ended (deadline %v after the call; %s)",
				c.worker, c.mode, c.outcome, over.Round(time.Millisecond), time.Duration(c.deadline-c.call).Round(time.Millisecond), ev.during(end))
		}
		if c.outcome == "ok" && c.valid <= c.ret && !paused(c.worker, c.call, c.ret) {
			res.violate(c.kind, "worker %d: Lock returned a lease whose ValidUntil had passed %v before (%s)", c.worker, time.Duration(c.ret-c.valid), ev.during(c.ret))
		}
	}

	// Fencing: the store's own count of lost updates, and its stale rejections.
	for name, m := range store {
		if m["lost"] > 0 {
			res.violate(soakKindOf(name), "the fenced store accepted %d stale writes (lost updates) on %s", m["lost"], name)
		}
	}

	// Per lock name: unique tokens, increasing in grant order, no two holders.
	for name, cs := range byName {
		checkSoakHolds(res, name, cs, ev)
	}

	checkSoakLiveness(res, calls, ev, lags)
	checkSoakExpiry(res, other, lagged)
	checkSoakFIFO(res, calls, ev)
	checkSoakStalls(res, byName, calls, ev)

	// Records other than Lock calls.
	notes := map[string]int{}
	for _, f := range other {
		line := f[len(f)-1]
		switch f[0] {
		case "goroutines":
			if n := soakInt(f[3]); n > 0 {
				res.violate("other", "worker %s: %d goroutines of relock still running after Client.Close (stacks in the log as \"stack\" lines): %s", f[1], n, line)
			}
		case "stack":
			if len(res.notes) < 20 {
				res.notes = append(res.notes, line)
			}
		case "closed":
			took := time.Duration(soakInt(f[3]))
			if f[4] != "true" || took > soakClosedMax {
				res.violate(f[2], "worker %s: Lock on a closed rueidis client took %v and returned %s, want ErrClosed within %v",
					f[1], took.Round(time.Millisecond), strings.Join(f[5:len(f)-1], " "), soakClosedMax)
			}
		case "late":
			w, from, to := soakInt(f[1]), int64(soakInt(f[3])), int64(soakInt(f[4]))
			if !paused(w, from, to) {
				res.violate(f[2], "worker %d: a fixed lease's Context was not done 2 s after its ValidUntil", w)
			}
		case "viol":
			res.violate("other", "worker %s: %s", f[1], line)
		case "note":
			// Errors of Lock or of the store: counted, the first shown.
			key := f[0] + " " + strings.Join(f[3:len(f)-1], " ")
			if len(key) > 200 {
				key = key[:200]
			}
			notes[key]++
		}
	}
	if excused > 0 {
		notes[fmt.Sprintf("Lock overran its ctx by more than %v while the worker could not run (lag probe): not counted", soakOverrun)] = excused
	}
	for k, n := range notes {
		res.notes = append(res.notes, fmt.Sprintf("%d× %s", n, k))
	}
	sort.Strings(res.notes)
	for _, p := range ev.probes {
		res.violate("other", "%s (quiesce probe)", p)
	}
	return res
}

func soakKindOf(name string) string {
	if name == "soak:rw" {
		return "rw-write"
	}
	return strings.TrimPrefix(name, "soak:")
}

func soakInt(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func parseSoakCall(f []string) (*soakCall, error) {
	if len(f) != 15 {
		return nil, fmt.Errorf("%d fields, want 15", len(f))
	}
	ints := make([]int64, 0, 12)
	for _, i := range []int{1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return nil, err
		}
		ints = append(ints, n)
	}
	return &soakCall{
		kind: f[0], worker: int(ints[0]), gid: int(ints[1]), mode: f[3],
		call: ints[2], deadline: ints[3], ret: ints[4], outcome: f[7],
		token: ints[5], valid: ints[6], end: ints[7], cause: f[11],
		acc: int(ints[8]), stale: int(ints[9]), lost: int(ints[10]),
	}, nil
}

// during describes what the soak was doing at ts: the fault period or calm
// window it fell in.
func (ev *soakEvents) during(ts int64) string {
	for _, cy := range ev.cycles {
		switch {
		case cy.start != 0 && ts >= cy.start && ts <= cy.heal:
			return "during " + cy.what
		case ts > cy.heal && ts <= cy.calmEnd:
			return fmt.Sprintf("calm, %v after healing %s", time.Duration(ts-cy.heal).Round(time.Millisecond), cy.what)
		}
	}
	return "between phases"
}

// restartBetween reports whether the lock Redis was restarted (every lock
// lost) between from and to.
func restartBetween(ev *soakEvents, from, to int64) bool {
	for _, r := range ev.restarts {
		if r >= from && r <= to {
			return true
		}
	}
	return false
}

// checkSoakHolds checks one lock's holds: tokens unique; a hold that ended
// (by its own view) before another began has a smaller token; and no two
// holds overlap, readers excepted, unless a restart of Redis between the
// first's Lock call and the second's grant explains it.
func checkSoakHolds(res *soakResult, name string, cs []*soakCall, ev *soakEvents) {
	seen := map[int64]*soakCall{}
	for _, c := range cs {
		if o := seen[c.token]; o != nil {
			res.violate(c.kind, "token %d of %s granted twice: worker %d and worker %d", c.token, name, o.worker, c.worker)
		}
		seen[c.token] = c
	}
	var holds []*soakCall
	for _, c := range cs {
		if c.held() {
			holds = append(holds, c)
		}
	}
	byStart := slices.Clone(holds)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].ret < byStart[j].ret })
	byEnd := slices.Clone(holds)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	tol := int64(soakTolerance)

	// Tokens follow the order of holds that did not overlap. Readers may
	// share the lock, so a reader granted before another reader's hold
	// began may return after it ended: reader pairs are not ordered.
	var (
		ended     int
		top, topW *soakCall // the largest token of the holds ended so far; of the non-readers
	)
	for _, y := range byStart {
		for ; ended < len(byEnd) && byEnd[ended].end+tol <= y.ret; ended++ {
			x := byEnd[ended]
			if top == nil || x.token > top.token {
				top = x
			}
			if x.kind != "rw-read" && (topW == nil || x.token > topW.token) {
				topW = x
			}
		}
		prev := top
		if y.kind == "rw-read" {
			prev = topW
		}
		if prev != nil && prev.token >= y.token {
			res.violate(y.kind, "token %d of %s (worker %d, granted %s) not above token %d of a hold that ended before (worker %d, %s, %s; %s)",
				y.token, name, y.worker, soakTime(y.ret), prev.token, prev.worker, prev.kind, soakTime(prev.end), ev.during(y.ret))
		}
	}

	// No two holders at once.
	var active []*soakCall
	for _, y := range byStart {
		keep := active[:0]
		for _, x := range active {
			if x.end > y.ret {
				keep = append(keep, x)
			}
		}
		active = keep
		for _, x := range active {
			if x.kind == "rw-read" && y.kind == "rw-read" {
				continue
			}
			if x.end <= y.ret+tol || restartBetween(ev, x.call, y.ret) {
				continue
			}
			res.violate(y.kind, "two holders of %s: worker %d (token %d, %s, held %s–%s by its own view) and worker %d (token %d, %s, from %s; %s)",
				name, x.worker, x.token, x.kind, soakTime(x.ret), soakTime(x.end), y.worker, y.token, y.kind, soakTime(y.ret), ev.during(y.ret))
		}
		active = append(active, y)
	}
}

// soakTime renders a Unix ns time for messages.
func soakTime(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000") }

// checkSoakLiveness checks that after every heal each worker acquires
// every kind within soakLiveness: no waiter starves. The bound is moved on
// by the stretches in it when a worker's goroutines could not run (lags,
// from the workers' lag probes): a lock's progress waits for every worker
// that holds it or is served before the one judged, so the machine
// explains that much of the wait.
func checkSoakLiveness(res *soakResult, calls []*soakCall, ev *soakEvents, lags map[int][]soakSpan) {
	stalled := func(from, to int64) int64 {
		var d int64
		for _, spans := range lags {
			for _, l := range spans {
				d += max(0, min(l.to, to)-max(l.from, from))
			}
		}
		return d
	}
	type key struct {
		worker int
		kind   string
	}
	got := map[key][]int64{}
	workers := map[int]bool{}
	for _, c := range calls {
		workers[c.worker] = true
		if c.outcome == "ok" {
			got[key{c.worker, c.kind}] = append(got[key{c.worker, c.kind}], c.ret)
		}
	}
	var writes []int64 // every writer's grants: readers wait for them by design
	for k, ts := range got {
		slices.Sort(ts)
		if k.kind == "rw-write" {
			writes = append(writes, ts...)
		}
	}
	slices.Sort(writes)
	for _, cy := range ev.cycles {
		limit := cy.heal + int64(soakLiveness)
		if cy.calmEnd < limit {
			continue // cut short: cannot judge
		}
		for w := range workers {
			for _, kind := range soakKinds {
				limit := limit
				if kind == "rw-write" {
					// Phase-fair: each writer's release admits the readers
					// waiting then, and a reader admitted that does not
					// take its hold up (its process paused, or killed at
					// the fault) holds the read phase until its waiting
					// deadline, a waiter timeout on, before the next
					// writer's turn.
					limit += int64(soakWaiterTimeout)
				}
				limit += stalled(cy.heal, limit)
				if cy.calmEnd < limit {
					continue // the next fault may explain the rest: cannot judge
				}
				ts := got[key{w, kind}]
				i, _ := slices.BinarySearch(ts, cy.heal)
				if i == len(ts) || ts[i] > limit {
					if j, _ := slices.BinarySearch(writes, cy.heal); kind == "rw-read" && j < len(writes) && writes[j] <= limit {
						// Writers were granted meanwhile: a waiting writer
						// holds new readers back (writer preference, as the
						// rwlock documents), so readers wait for every
						// writer queued. That is policy, not a stuck waiter;
						// a stall shows as a free lock with waiters (above).
						res.note("worker %d acquired no rw-read within %v of the heal at %s while writers were granted (writer preference)", w, soakLiveness, soakTime(cy.heal))
						continue
					}
					next := "never"
					if i < len(ts) {
						next = time.Duration(ts[i]-cy.heal).Round(time.Millisecond).String() + " after"
					}
					res.violate(kind, "worker %d acquired no %s within %v of the heal at %s (after %s); next acquisition %s",
						w, kind, time.Duration(limit-cy.heal), soakTime(cy.heal), cy.what, next)
				}
			}
		}
	}
}

// strictWindows returns the calm windows' parts where every leftover of the
// fault before has expired: from heal + soakSettle to the window's end.
func strictWindows(ev *soakEvents) []soakSpan {
	var out []soakSpan
	for _, cy := range ev.cycles {
		from := cy.heal + int64(soakSettle)
		if cy.calmEnd > from {
			out = append(out, soakSpan{from, cy.calmEnd})
		}
	}
	return out
}

// checkSoakFIFO checks that in strict windows the fair lock is granted in
// arrival order: a fair Lock called soakFIFOSlack before another returns
// before it.
func checkSoakFIFO(res *soakResult, calls []*soakCall, ev *soakEvents) {
	for _, w := range strictWindows(ev) {
		var in []*soakCall
		for _, c := range calls {
			if c.kind == "fair" && c.outcome == "ok" && c.call >= w.from && c.ret <= w.to {
				in = append(in, c)
			}
		}
		sort.Slice(in, func(i, j int) bool { return in[i].call < in[j].call })
		for j, b := range in {
			for _, a := range in[:j] {
				if a.call+int64(soakFIFOSlack) < b.call && b.ret < a.ret {
					res.violate("fair", "granted out of arrival order: worker %d called Lock at %s and got it at %s, after worker %d who called %v later and got it at %s",
						a.worker, soakTime(a.call), soakTime(a.ret), b.worker, time.Duration(b.call-a.call).Round(time.Millisecond), soakTime(b.ret))
				}
			}
		}
	}
}

// checkSoakStalls checks that in strict windows no lock stays free for
// more than soakStall while a Lock of it is waiting: a lost wake-up, an
// expiry that wakes nobody, or a ghost holder left by a timed-out Lock.
func checkSoakStalls(res *soakResult, byName map[string][]*soakCall, calls []*soakCall, ev *soakEvents) {
	windows := strictWindows(ev)
	for name, cs := range byName {
		var holds []*soakCall
		for _, c := range cs {
			if c.held() {
				holds = append(holds, c)
			}
		}
		sort.Slice(holds, func(i, j int) bool { return holds[i].ret < holds[j].ret })
		var pending []*soakCall
		for _, c := range calls {
			if soakLockName(c.kind) == name {
				pending = append(pending, c)
			}
		}
		var freeFrom int64 // the lock is free by every holder's view from here
		for i, h := range holds {
			if i > 0 && h.ret > freeFrom {
				checkSoakGap(res, ev, name, soakSpan{freeFrom, h.ret}, pending, windows)
			}
			freeFrom = max(freeFrom, h.end)
		}
	}
}

func checkSoakGap(res *soakResult, ev *soakEvents, name string, gap soakSpan, pending []*soakCall, windows []soakSpan) {
	if time.Duration(gap.to-gap.from) <= soakStall {
		return
	}
	inside := false
	for _, w := range windows {
		if gap.from >= w.from && gap.to <= w.to {
			inside = true
			break
		}
	}
	if !inside {
		return
	}
	for _, c := range pending {
		// The stretch of the gap this call spent waiting.
		from, to := max(c.call, gap.from), min(c.ret, gap.to)
		if time.Duration(to-from) > soakStall {
			res.violate(c.kind, "%s was free for %v (%s–%s; %s) while worker %d's Lock (%s, called %s) waited",
				name, time.Duration(gap.to-gap.from).Round(time.Millisecond), soakTime(gap.from), soakTime(gap.to), ev.during(gap.from), c.worker, c.mode, soakTime(c.call))
			return
		}
	}
}

// checkSoakExpiry checks the expiry probes' records: in each
// probe, every holder got the lock, and after each lease's end the next
// grant came within soakHandOn, unless the machine held the next holder's
// worker up (lagged) for the excess.
func checkSoakExpiry(res *soakResult, other [][]string, lagged func(worker int, from, to int64, d time.Duration) bool) {
	type grant struct {
		worker         int
		call, ret, end int64
	}
	probes := map[int][]grant{}
	for _, f := range other {
		if f[0] != "expiry" || len(f) < 8 {
			continue
		}
		g := grant{worker: soakInt(f[1]), call: int64(soakInt(f[3])), ret: int64(soakInt(f[4])), end: int64(soakInt(f[5]))}
		probes[soakInt(f[2])] = append(probes[soakInt(f[2])], g)
	}
	for p, gs := range probes {
		if want := soakWorkers * soakExpiryHolders; len(gs) != want {
			res.violate("fair", "expiry probe %d: %d holders recorded, want %d", p, len(gs), want)
		}
		var granted []grant
		for _, g := range gs {
			if g.ret == 0 {
				res.violate("fair", "expiry probe %d: worker %d's holder did not get the lock within %v while only expiries handed it on", p, g.worker, soakExpiryWait)
				continue
			}
			granted = append(granted, g)
		}
		sort.Slice(granted, func(i, j int) bool { return granted[i].ret < granted[j].ret })
		for i := 1; i < len(granted); i++ {
			prev, g := granted[i-1], granted[i]
			late := time.Duration(g.ret - prev.end)
			if late <= soakHandOn || lagged(g.worker, prev.end, g.ret, late-soakHandOn) {
				continue
			}
			res.violate("fair", "expiry probe %d: the lease of worker %d's holder ended at %s and the next grant (worker %d's holder) came %v later, want within %v",
				p, prev.worker, soakTime(prev.end), g.worker, late.Round(time.Millisecond), soakHandOn)
		}
	}
	if len(probes) == 0 {
		res.violate("other", "no expiry probe recorded")
	}
}
