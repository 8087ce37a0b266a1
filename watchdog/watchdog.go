// Package watchdog is the one lease scheduler of a relock Client.
//
// It keeps every lease the Client holds: a renewed lease is extended every
// third of its length, and all renewals due at about the same time go to
// Redis in one round trip; a fixed lease is only watched. Each lease has a
// validity, last confirmation + lease − drift on the local monotonic clock,
// until which it is certainly held. A lease is lost, and its lost callback
// called with ErrTaken or ErrExpired, when a renewal finds the lock gone or held
// by another owner, or when its validity passes without a successful
// renewal. Renewals that fail on network errors are retried until then.
// The renewal script never creates a lock, so a lost lease stays lost.
package watchdog

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relockgo/relock/luascripts"
)

// Drift is the allowance for clock drift between the client and Redis taken
// off a lease's validity: lease/100 + 2ms.
func Drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

// Entry is one lease the watchdog keeps: a held lock's, or a waiter's place
// in a queue, which is kept the same way.
type Entry struct {
	call  luascripts.Call // the renewal; returns 1 when renewed, 0 when not held
	own   Renewal         // or, when not nil, the renewal that runs on its own
	lease time.Duration
	renew bool
	lost  func(error) // called at most once, from the watchdog; never after Remove returned true

	// Guarded by Watchdog.mu.
	validUntil time.Time
	next       time.Time // when the next renewal is due; zero for a fixed lease
	inflight   bool      // a renewal is on its way
	live       bool      // registered, not lost, not removed
	at         time.Time // its key in the heap: due() when last placed
	index      int       // its place in the heap; -1 when not in it
	w          *Watchdog
}

// due is when the watchdog must next look at e: when its validity ends,
// or, for a renewed lease with no renewal on its way, when its renewal is
// due, if sooner.
func (e *Entry) due() time.Time {
	if e.renew && !e.inflight && e.next.Before(e.validUntil) {
		return e.next
	}
	return e.validUntil
}

// early reports whether e's renewal may go now, with a batch due: from
// lease/30 before it is due, so that renewals due close together share a
// round trip.
func (e *Entry) early(now time.Time) bool {
	return e.renew && !e.inflight && !now.Before(e.next.Add(-e.lease/30))
}

// queue is a heap of entries by due time (container/heap).
type queue []*Entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *queue) Push(x any) {
	e := x.(*Entry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*q = old[:len(old)-1]
	return e
}

// NewEntry returns a lease confirmed at confirmed (when the command that
// took it was sent), lasting lease. With renew set the watchdog renews it
// every lease/3 with renewal, which must return 1 when renewed and 0 when
// the lease is not held any more; otherwise the watchdog only ends it at its
// validity. lost is called with ErrTaken or ErrExpired when the lease is
// lost; it must not block.
func NewEntry(renewal luascripts.Call, lease time.Duration, renew bool, confirmed time.Time, lost func(cause error)) *Entry {
	e := &Entry{call: renewal, lease: lease, renew: renew, lost: lost, index: -1}
	e.confirm(confirmed)
	return e
}

// NewHandedEntry returns a renewed lease that another owner's release
// handed over (see luascripts' hand_on): certainly held until validUntil,
// what is left of the new holder's deadline as a waiter, and due for
// renewal, which extends it to lease, when a third of that has passed, as
// any lease is: a hold shorter than that costs no renewal. Otherwise it is
// NewEntry's.
func NewHandedEntry(renewal luascripts.Call, lease time.Duration, validUntil time.Time, lost func(cause error)) *Entry {
	now := time.Now()
	return &Entry{call: renewal, lease: lease, renew: true, lost: lost, index: -1, validUntil: validUntil, next: now.Add(max(validUntil.Sub(now)/3, 0))}
}

// A Renewal renews a lease that cannot share a batch (one held on several
// servers). It reports whether the lease is still held; an error means the
// outcome is unknown, and the renewal is retried until the lease's validity
// passes. It must return when ctx is canceled.
type Renewal func(ctx context.Context) (held bool, err error)

// NewOwnEntry returns a lease like NewEntry's, renewed every lease/3 by
// renew on its own round trips rather than in the watchdog's batch.
func NewOwnEntry(renew Renewal, lease time.Duration, confirmed time.Time, lost func(cause error)) *Entry {
	e := &Entry{own: renew, lease: lease, renew: true, lost: lost, index: -1}
	e.confirm(confirmed)
	return e
}

// confirm records that the lock was held for a full lease at t.
func (e *Entry) confirm(t time.Time) {
	if v := t.Add(e.lease - Drift(e.lease)); v.After(e.validUntil) {
		e.validUntil = v
	}
	if e.renew {
		e.next = t.Add(e.lease / 3)
	}
}

// name names the lease for logs: its lock's key.
func (e *Entry) name() string {
	if e.own != nil {
		return "(several servers)"
	}
	return e.call.Keys[0]
}

// ValidUntil returns the time on the local monotonic clock until which the
// lease is certainly held.
func (e *Entry) ValidUntil() time.Time {
	if e.w == nil {
		return e.validUntil
	}
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.validUntil
}

// Batch describes one renewal round trip, for New's report.
type Batch struct {
	Size    int           // renewals sent
	Latency time.Duration // of the round trip
	Failed  int           // renewals with no answer (retried until their lease ends)
	Lost    int           // leases found lost
}

// Watchdog renews and watches leases. Its zero value is not usable; call New.
//
// Its entries are a heap ordered by when each must next be looked at (due):
// Add, Remove and a renewal's outcome cost O(log n) however many leases it
// keeps, and its one timer fires by the first due time, so that the loop
// sleeps until an entry may need it. Adding a lease that falls due after
// the first — the common case — does not even move the timer, and no call
// wakes the loop.
type Watchdog struct {
	runner *luascripts.Runner // runs the renewals on the Client's rueidis client
	log    *slog.Logger
	report func(Batch) // nil, or called after each renewal round trip

	mu      sync.Mutex
	queue   queue       // guarded by mu: the live entries, by due time
	timer   *time.Timer // fires by the first entry's due time (see arm)
	timerAt time.Time   // guarded by mu: when timer fires; zero when not set
	ctx     context.Context
	cancel  context.CancelFunc // cancels ctx: Close
	wg      sync.WaitGroup     // the loop and renewal batches in flight
	visits  atomic.Int64       // entries the loop examined, for tests
}

// New starts the watchdog of a Client whose scripts run through runner.
// Close stops it. report, if not nil, is called after each renewal round
// trip, from the watchdog's goroutines; it must not block.
func New(runner *luascripts.Runner, log *slog.Logger, report func(Batch)) *Watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watchdog{
		runner: runner,
		log:    log,
		report: report,
		timer:  time.NewTimer(time.Hour),
		ctx:    ctx,
		cancel: cancel,
	}
	w.timer.Stop()
	w.wg.Add(1)
	go w.loop()
	return w
}

// Add starts keeping e. It returns false, and does not keep e, after Close.
func (w *Watchdog) Add(e *Entry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return false
	}
	e.w = w
	e.live = true
	e.at = e.due()
	heap.Push(&w.queue, e)
	w.arm()
	return true
}

// Confirm records that e's lock was found held for a full lease at t (a
// re-entry refreshed it), and reports whether e is still live.
func (w *Watchdog) Confirm(e *Entry, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !e.live {
		return false
	}
	e.confirm(t)
	w.fix(e)
	return true
}

// Extend records that e's lock was found held for at least d at t (an
// explicit extension), and reports whether e is still live. Its validity
// moves to t + d − Drift(d) if that is later; it never moves back.
func (w *Watchdog) Extend(e *Entry, t time.Time, d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !e.live {
		return false
	}
	if v := t.Add(d - Drift(d)); v.After(e.validUntil) {
		e.validUntil = v
	}
	w.fix(e)
	return true
}

// Remove stops keeping e and reports whether it was live: not lost and not
// removed before. Once Remove returned true, e's lost callback is not called
// (a renewal in flight is ignored); when it returns false, the callback has
// been or will be called, unless Close ended e.
func (w *Watchdog) Remove(e *Entry) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !e.live {
		return false
	}
	w.drop(e)
	return true
}

// Close stops the watchdog and waits for its goroutines. It does not call
// the lost callbacks of the entries it kept; the caller ends them. Close is
// idempotent.
func (w *Watchdog) Close() {
	w.mu.Lock()
	w.cancel()
	for _, e := range w.queue {
		e.live = false
		e.index = -1
	}
	w.queue = nil
	w.timer.Stop()
	w.timerAt = time.Time{}
	w.mu.Unlock()
	w.wg.Wait()
}

// fix moves e to its place after its due time changed. Called with mu held.
func (w *Watchdog) fix(e *Entry) {
	if at := e.due(); !at.Equal(e.at) && e.index >= 0 {
		e.at = at
		heap.Fix(&w.queue, e.index)
		w.arm()
	}
}

// drop ends e: out of the heap, not live. Called with mu held.
func (w *Watchdog) drop(e *Entry) {
	e.live = false
	if e.index >= 0 {
		heap.Remove(&w.queue, e.index)
		w.arm()
	}
}

// arm makes the timer fire by the first entry's due time. It only ever
// brings the timer forward: a timer set for an entry that was removed, or
// whose renewal moved it later, fires early, and the loop finds nothing
// due and sets it again. So a Lock and Unlock, which add and remove an
// entry due later than the first, cost no timer change at all. Called with
// mu held; it never wakes the loop itself.
func (w *Watchdog) arm() {
	if len(w.queue) == 0 {
		return
	}
	if at := w.queue[0].at; w.timerAt.IsZero() || at.Before(w.timerAt) {
		w.timer.Reset(time.Until(at))
		w.timerAt = at
	}
}

func (w *Watchdog) loop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.timer.C:
		}
		batch, lost := w.collect(time.Now())
		for _, e := range lost {
			e.lost(ErrExpired)
		}
		shared := batch[:0]
		for _, e := range batch {
			if e.own != nil {
				w.wg.Add(1)
				go w.renew([]*Entry{e})
				continue
			}
			shared = append(shared, e)
		}
		if len(shared) > 0 {
			w.wg.Add(1)
			go w.renew(shared)
		}
	}
}

// collect ends the leases whose validity has passed and collects the
// renewals due by now, and those due soon after (early), so that they
// share the round trip; then it sets the timer for the next.
func (w *Watchdog) collect(now time.Time) (batch, lost []*Entry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timerAt = time.Time{} // it fired
	for len(w.queue) > 0 {
		e := w.queue[0]
		w.visits.Add(1)
		switch {
		case !now.Before(e.validUntil):
			heap.Pop(&w.queue)
			e.live = false
			lost = append(lost, e)
		case e.early(now):
			e.inflight = true
			batch = append(batch, e)
			e.at = e.due()
			heap.Fix(&w.queue, 0)
		default:
			w.arm()
			return batch, lost
		}
	}
	w.arm()
	return batch, lost
}

// renew sends the renewals of batch in one round trip (or runs the one
// entry's own renewal) and records the outcomes.
func (w *Watchdog) renew(batch []*Entry) {
	defer w.wg.Done()
	var deadline time.Time
	w.mu.Lock()
	for _, e := range batch {
		if e.validUntil.After(deadline) {
			deadline = e.validUntil
		}
	}
	w.mu.Unlock()
	// No renewal can help once the last validity in the batch has passed.
	// The ctx is canceled then rather than given that deadline: rueidis
	// waits out a ctx with a deadline on the socket, where Close could not
	// interrupt it, and answers a cancelable one from its pipeline.
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	stop := time.AfterFunc(time.Until(deadline), cancel)
	defer stop.Stop()
	sent := time.Now()
	held, errs := w.send(ctx, batch)
	latency := time.Since(sent)

	var lost []*Entry
	failed := 0
	w.mu.Lock()
	for i, e := range batch {
		e.inflight = false
		if !e.live {
			continue
		}
		switch err := errs[i]; {
		case err != nil:
			failed++
			// Retry soon; the lease is lost if its validity passes first.
			e.next = time.Now().Add(e.lease / 10)
			w.log.Warn("relock: lease renewal failed; retrying", "lease", e.name(), "err", err)
			w.fix(e)
		case held[i]:
			e.confirm(sent)
			w.fix(e)
		default:
			w.drop(e)
			lost = append(lost, e)
		}
	}
	w.mu.Unlock()
	if w.report != nil {
		w.report(Batch{Size: len(batch), Latency: latency, Failed: failed, Lost: len(lost)})
	}
	for _, e := range lost {
		e.lost(ErrTaken)
	}
}

// renewChunk is how many renewals share a round trip at most. Redis runs a
// round trip's scripts back to back, and a Lock or Unlock sent on the same
// pipelined connection meanwhile waits behind them: a larger batch (a
// Client holding 100k leases has some 10k renewals due a second) goes as
// several round trips, one after the other, so that other commands wait
// behind one chunk at most, not the whole batch.
const renewChunk = 512

// send runs the renewals of batch, renewChunk per round trip, and returns
// each one's outcome: whether the lease is held, or the error that left it
// unknown.
func (w *Watchdog) send(ctx context.Context, batch []*Entry) (held []bool, errs []error) {
	held, errs = make([]bool, len(batch)), make([]error, len(batch))
	if len(batch) == 1 && batch[0].own != nil {
		held[0], errs[0] = batch[0].own(ctx)
		return held, errs
	}
	calls := make([]luascripts.Call, len(batch))
	for i, e := range batch {
		calls[i] = e.call
	}
	for start := 0; start < len(calls); start += renewChunk {
		chunk := calls[start:min(start+renewChunk, len(calls))]
		for i, r := range w.runner.ExecMulti(ctx, chunk...) {
			n, err := r.AsInt64()
			held[start+i], errs[start+i] = n == 1, err
		}
	}
	return held, errs
}

// Why a lease was lost, as passed to an Entry's lost callback.
var (
	ErrExpired = errors.New("lease expired without a confirmed renewal")
	ErrTaken   = errors.New("renewal found the lock gone or held by another owner")
)
