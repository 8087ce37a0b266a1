package relock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/internal/wake"
	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// maxWait bounds a waiter's sleep between attempts. Wake-ups make waiting
// prompt; this bound only matters when one is lost (pub/sub delivers at most
// once) and the holder's lease is long.
const maxWait = 5 * time.Second

// minGone is the least time an owner that gave up with an acquire
// unanswered stays recorded as gone. The acquire can only land while it is
// still on its way to Redis; past this, a late landing holds the lock until
// its lease ends, as a crashed holder's would.
const minGone = time.Minute

// binding is one named lock of one kind on a Client: the engine's side of
// kind.Binding. It is immutable.
type binding struct {
	c             *Client
	spec          *kind.Spec
	name          string
	keys          luascripts.Keys
	lease         time.Duration
	ms            string // lease in milliseconds, as scripts take it
	fixed         bool   // lease set by WithLease: not renewed
	waiterTimeout time.Duration
	waiterMs      string
	goneMs        string // how long an owner that gave up stays recorded as gone
	nodeTimeout   time.Duration
	place         placement // where the lock lives: master{b}, or a quorum (Redlock)
	err           error     // invalid name or option: every call fails with it
}

// bind is the engine's side of kind.New: every lock a kind makes is a
// binding. An invalid argument is kept, and returned by every call.
func bind(c *Client, name string, spec *kind.Spec, opts []LockOption) kind.Binding[*Lease] {
	return newBinding(c, name, spec, opts)
}

// newBinding is bind for the engine's own use: the concrete binding.
func newBinding(c *Client, name string, spec *kind.Spec, opts []LockOption) *binding {
	b := &binding{c: c, spec: spec, name: name}
	b.place = master{b}
	cfg := lockConfig{waiterTimeout: DefaultWaiterTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case clientDefect(c) != "":
		b.err = b.errorf(ErrInvalid, "%s", clientDefect(c))
	case name == "":
		b.err = b.errorf(ErrInvalid, "empty name")
	case cfg.err != nil:
		b.err = fmt.Errorf("%w (%s %s)", cfg.err, spec.Kind, b.short())
	}
	if clientDefect(c) != "" {
		return b
	}
	b.keys = luascripts.NewKeys(c.prefix, name)
	b.lease = c.timeout
	if cfg.lease > 0 {
		b.lease, b.fixed = cfg.lease, true
	}
	b.waiterTimeout = cfg.waiterTimeout
	b.ms, b.waiterMs, b.goneMs = c.millis(b.lease), c.millis(b.waiterTimeout), c.millis(max(b.lease, b.waiterTimeout, minGone))
	b.nodeTimeout = cfg.nodeTimeout
	if b.nodeTimeout == 0 {
		b.nodeTimeout = max(b.lease/50, 5*time.Millisecond)
	}
	return b
}

// short is the lock's name as messages quote it.
func (b *binding) short() string { return shortName(b.name) }

// shortName is name as errors quote it: at most 64 bytes, quoted.
func shortName(name string) string {
	const most = 64
	if len(name) > most {
		return strconv.Quote(name[:most]) + "…"
	}
	return strconv.Quote(name)
}

// errorf wraps sentinel with the lock and what happened.
func (b *binding) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s: %s", sentinel, b.kind(), b.short(), fmt.Sprintf(format, args...))
}

// wrap annotates err with the lock and the operation; a closed client's
// error takes closedErr's one shape.
func (b *binding) wrap(op string, err error) error {
	if errors.Is(err, rueidis.ErrClosing) {
		return b.closedErr(op, err)
	}
	return fmt.Errorf("relock: %s %s: %s: %w", b.kind(), b.short(), op, err)
}

// kind names the lock's kind (and side) in errors and observer events:
// "mutex", or "rwlock.read" for a side, without spaces or brackets, so that
// metrics and traces can take it as an attribute value.
func (b *binding) kind() string {
	if b.spec.Mode != "" {
		return b.spec.Kind + "." + b.spec.Mode
	}
	return b.spec.Kind
}

// check returns the error every call on this lock fails with: an invalid
// name or option (ErrInvalid), a closed Client (ErrClosed); or nil.
func (b *binding) check() error {
	if b.err != nil {
		return b.err
	}
	if b.c.isClosed() {
		return b.errorf(ErrClosed, "use after Close")
	}
	return nil
}

// The scripts' calls of this lock (see luascripts/abi.go).

// acquireCall is an acquire attempt of owner: of a Lock when wait is set,
// queued if not granted when queue is set too (else only behind waiters
// queued already), and taken within the hold of owner within (a downgrade)
// if set; first says no attempt of owner was sent before it.
func (b *binding) acquireCall(owner string, wait, queue, first bool, within string) luascripts.Call {
	return luascripts.AcquireCall(b.spec.Acquire, b.keys, luascripts.Acquire{
		Owner: owner, LeaseMs: b.ms, Wait: wait, Queue: queue, WaiterMs: b.waiterMs, Publish: b.c.publish, Within: within,
		First: first, Extra: b.spec.AcquireArgs,
	})
}

// releaseCall is the release of owner's hold at depth (0: all of it), or
// the withdrawal of owner as a waiter; with gone set, owner is also
// recorded as gone.
func (b *binding) releaseCall(owner string, depth int, gone bool) luascripts.Call {
	goneMs := "0"
	if gone {
		goneMs = b.goneMs
	}
	return luascripts.ReleaseCall(b.spec.Release, b.keys, owner, b.c.publish, depth, goneMs)
}

// renewCall is the watchdog's renewal of owner's hold for the lock's lease.
func (b *binding) renewCall(owner string) luascripts.Call {
	return luascripts.RenewCall(b.spec.Renew, b.keys, owner, b.ms)
}

// ctxErr is ctx's error, joined with its cause when that says more.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return join(err, cause)
	}
	return err
}

// join returns an error that matches both a and b (errors.Is) and reads on
// one line, unlike errors.Join; b may be nil.
func join(a, b error) error {
	if b == nil {
		return a
	}
	return fmt.Errorf("%w: %w", a, b)
}

// isRedisErr reports whether err is Redis's answer (a refusal), not a
// network or client error that leaves the outcome unknown.
func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

// Acquire is the engine's acquire loop, shared by every kind. The
// uncontended path is one round trip. A Lock joins the lock's wake-up
// subscription before its first attempt if this Client already has one, or
// after a failed attempt otherwise (retrying at once if the subscription is
// live already), and then retries after each wake-up, each expiry of what
// blocks it, the moment it starts starving (a kind that queues waiters
// only then: once queued, it is woken by name), or maxWait, whichever comes
// first, until ctx ends. A kind whose
// waiters leave a trace in Redis (a queue) has their places kept by the
// watchdog's heartbeats and withdrawn when they stop waiting. Lock (not
// TryLock) waits out network errors the same way, with a backoff.
//
// A queued waiter to which a release handed the lock holds it on the
// wake-up that says so (see waiter.handedOver).
//
// Acquire returns within a few milliseconds of ctx's end whatever Redis
// does (see waiter.attempt). The owner of an attempt whose reply never
// came is released as gone, in the background.
func (b *binding) Acquire(ctx context.Context, try bool) (*Lease, error) {
	if b.err == nil && b.c.obs != nil {
		return b.observe(ctx, try, b.c.obs)
	}
	return b.acquire(ctx, try)
}

// observe is Acquire told to o.
func (b *binding) observe(ctx context.Context, try bool, o Observer) (*Lease, error) {
	start := time.Now()
	e := LockDone{LockStart: LockStart{Kind: b.kind(), Name: b.name, Try: try}}
	e.Reentry = !b.spec.Unshared && heldBy(ctx, b.c, b.keys.Lock, b.spec.Mode) != nil
	octx := o.LockStarted(ctx, e.LockStart)
	l, err := b.acquire(ctx, try)
	e.Wait, e.Err = time.Since(start), err
	if l != nil {
		// The lease says what happened: the ctx's hold may have ended
		// between the check above and the engine's own.
		e.Token, e.Reentry, e.Owner = l.Token(), !l.first, l.h.owner
	}
	o.LockDone(octx, e)
	return l, err
}

// acquire is Acquire.
func (b *binding) acquire(ctx context.Context, try bool) (*Lease, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, b.wrap("lock", ctxErr(ctx))
	}
	spec := b.spec
	if h := heldBy(ctx, b.c, b.keys.Lock, spec.Mode); h != nil && !spec.Unshared {
		return b.reenter(ctx, h)
	}
	if spec.Conflicts != "" && heldBy(ctx, b.c, b.keys.Lock, spec.Conflicts) != nil {
		return nil, b.errorf(ErrWouldDeadlock, "lock: this call chain holds its %s side", spec.Conflicts)
	}
	return b.place.acquire(ctx, try)
}

// acquire is the acquire loop on one master (see binding.Acquire).
func (m master) acquire(ctx context.Context, try bool) (*Lease, error) {
	b := m.b
	spec := b.spec
	within := ""
	if spec.Within != "" {
		if h := heldBy(ctx, b.c, b.keys.Lock, spec.Within); h != nil {
			within = h.owner
		}
	}

	w := &waiter{b: b, owner: b.c.newOwner(), within: within, wait: !try}
	defer w.leave()
	if !try {
		// Other waiters of this Client keep the lock's wake-ups coming:
		// listen from before the first attempt (a local step, no round trip).
		w.sub = b.c.hub.JoinLive(b.keys.Wake)
	}
	bo := newBackoff()
	again := false    // the last attempt was an immediate retry
	held := false     // an attempt found the lock held by another
	var unacked error // the last grant too few replicas acknowledged
	for {
		next := w.next()
		sent := time.Now()
		token, wait, err := w.attempt(ctx)
		switch {
		case errors.Is(err, errGaveUp):
			// ctx ended before the reply; the attempt cleans up after
			// itself. Reporting the lock as held needs an attempt that
			// found it so.
			if held {
				return nil, join(b.errorf(ErrNotAcquired, "lock"), ctxErr(ctx))
			}
			return nil, b.wrap("lock", join(ctxErr(ctx), unacked))
		case err != nil && (errors.Is(err, rueidis.ErrClosing) || b.c.isClosed()):
			return nil, b.closedErr("lock", err)
		case errors.Is(err, ErrNotReplicated) && try:
			return nil, b.wrap("try lock", err)
		case errors.Is(err, ErrNotReplicated):
			unacked = err
			b.c.log.Warn("relock: grant not replicated; retrying", "lock", b.short(), "err", err)
			if !bo.Sleep(ctx) {
				return nil, b.wrap("lock", join(err, ctxErr(ctx)))
			}
			continue
		case err != nil && (try || isRedisErr(err)):
			return nil, b.failed("lock", err, nil)
		case err != nil:
			b.c.log.Warn("relock: acquire failed; retrying", "lock", b.short(), "err", err)
			if !bo.Sleep(ctx) {
				return nil, b.failed("lock", err, ctxErr(ctx))
			}
			continue
		case token > 0:
			lease, err := b.grant(ctx, w.owner, token, sent, time.Time{})
			if lease != nil || err != nil {
				w.acquired = lease != nil
				return lease, err
			}
			// The grant came after its validity had passed: it is being
			// released. Try again as a new owner, so that that release
			// cannot undo a later grant.
			if try {
				return nil, b.errorf(ErrNotAcquired, "try lock: the grant arrived after its lease")
			}
			w.restart(false)
			continue
		case try:
			return nil, b.errorf(ErrNotAcquired, "try lock")
		}
		held = true
		bo = newBackoff()
		if w.since.IsZero() {
			w.since = sent
		}
		w.waited(sent)
		if w.sub == nil {
			w.sub = b.c.hub.Join(b.keys.Wake)
			// Take the signal before asking whether the subscription is
			// live: a confirmation in between then fires it, or is seen.
			next = w.next()
			if joinedHook != nil {
				joinedHook()
			}
			if w.sub.Live() {
				// A release between the attempt and the join published to
				// nobody here: try again at once.
				continue
			}
		}
		d := maxWait
		switch {
		case wait == luascripts.WaitRetry && !again: // gone since the attempt: try again at once, once
			again = true
			continue
		case wait == luascripts.WaitRetry:
			d = time.Millisecond
		case wait >= 0:
			d = min(d, time.Duration(wait+1)*time.Millisecond)
		}
		if at := w.starvesAt(); !at.IsZero() {
			// Releases may wake only queued waiters from now on: try
			// again when starving, to take a place in the queue.
			d = min(d, max(time.Until(at), time.Millisecond))
		}
		again = false
		if err := b.wait(ctx, next, d); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, err
			}
			return nil, join(b.errorf(ErrNotAcquired, "lock"), err)
		}
		// Before asking what the wake-up said: a wake-up from here on
		// fires the next signal.
		next = w.next()
		if until, token := w.handedOver(); token > 0 {
			lease, err := b.grant(ctx, w.owner, token, time.Now(), until)
			if lease != nil || err != nil {
				w.acquired = lease != nil
				return lease, err
			}
			// Its validity had passed: released in the background, as
			// above; try again as a new owner.
			w.restart(false)
		}
	}
}

// handedOver returns the token of a hand-over that a wake-up delivered to
// w's owner (another owner's release made it the holder: see
// luascripts' hand_on), and until when the lock is certainly held. Its
// token is 0 when no hand-over came, or when w takes one up by an attempt
// instead (take_up), which its next one does: for a fixed lease, which
// must last its length from the grant; when grants wait for replicas;
// and when the wake-up cannot be trusted or leaves too little (below).
//
// A grant lasts what was left of the owner's deadline as a queued waiter
// (a reader's, as recorded waiting for a writer: rw.lua, admit_readers),
// which its attempts and heartbeats pushed forward: it expires no earlier
// than the waiter timeout after the first attempt that queued the owner
// was sent (less drift), which is the bound used. Not the last refresh's:
// only this bound holds for every grant the owner ever got, whichever the
// wake-up is.
//
// That bound holds while Redis keeps the grant. A wake-up read late — the
// process was paused with it in its socket — may name a grant that Redis
// has lost since (a restart without persistence, a failover, a
// ForceUnlock) and that another owner replaced: Lock would return a lease
// beside that owner's, with a lower token. So a wake-up is trusted only
// while it is fresh: its token is the server's clock when the release
// minted it, which the clock the owner's last queued attempt read dates on
// this process's clock (see fresh). A stale one is settled by an attempt,
// one round trip, as is a grant with less than handOverLeft left: Lock
// never returns a lease about to lapse.
func (w *waiter) handedOver() (until time.Time, token int64) {
	b := w.b
	if w.sub == nil || w.queuedAt.IsZero() || b.fixed || b.c.ack.replicas > 0 {
		return time.Time{}, 0
	}
	if token = w.sub.Granted(w.owner); token == 0 {
		return time.Time{}, 0
	}
	now := time.Now()
	until = w.queuedAt.Add(b.waiterTimeout - watchdog.Drift(b.waiterTimeout))
	if !w.fresh(token, now) || until.Sub(now) < b.handOverLeft() {
		return time.Time{}, 0 // the attempt that follows takes the grant up, if live
	}
	return until, token
}

// handOverLeft is the least validity a hand-over must leave its waiter to
// be held on the wake-up alone, and the most a wake-up may have aged
// (handOverAge) is a fraction of it: the grant lasts up to the waiter
// timeout, and is renewed to the lease when a third of what it leaves has
// passed, so a third of the shorter of the two leaves that renewal the
// time of a round trip.
func (b *binding) handOverLeft() time.Duration { return min(b.lease, b.waiterTimeout) / 3 }

// handOverAge is how old a hand-over's wake-up may be, by fresh's bound,
// to be trusted: a wake-up delivered as it should be is milliseconds old;
// one older than this comes from a process that was paused or a
// connection that stalled, and is checked by an attempt.
func (b *binding) handOverAge() time.Duration { return b.handOverLeft() / 3 }

// fresh reports whether a hand-over whose token is token, read at now, is
// certainly younger than handOverAge. The token is the server's clock, in
// µs, when the release minted it (fence.lua: the clock, unless more than
// one grant came in a microsecond, a release that hands read holds to n
// readers minted n tokens at once, n − 1 µs ahead at most, or the clock
// stepped back, which could make a stale wake-up look fresh, as it would
// break the tokens' own floor). The last queued attempt, sent at clock.sent, read the server's
// clock clock.serverMs after that send: the hand-over was minted no
// earlier than clock.sent + (token/1000 − clock.serverMs) on this
// process's clock, less a millisecond for the truncations and the drift
// of the two clocks since the attempt. Without a reading (a reply that
// gives none), nothing is fresh.
func (w *waiter) fresh(token int64, now time.Time) bool {
	c := w.clock
	if c.sent.IsZero() {
		return false
	}
	minted := c.sent.Add(time.Duration(token/1000-c.serverMs)*time.Millisecond - time.Millisecond - watchdog.Drift(now.Sub(c.sent)))
	return now.Sub(minted) < w.b.handOverAge()
}

// serverClock is a reading of the server's clock: serverMs, read by a
// command sent at sent on this process's clock.
type serverClock struct {
	sent     time.Time
	serverMs int64
}

// joinedHook, when set (by tests only), runs between taking the wake-up
// signal and asking whether a just-joined subscription is live.
var joinedHook func()

// errGaveUp reports an attempt whose caller's ctx ended before its reply.
var errGaveUp = errors.New("gave up waiting for the reply")

// waiter is the state of one Acquire: its owner id and what it must undo
// when it stops without the lock.
type waiter struct {
	b         *binding
	owner     string
	within    string          // see kind.Spec.Within
	tried     bool            // an attempt of owner was sent: it may have queued owner, and a release may have handed owner the lock since
	wait      bool            // a Lock: attempts may queue the owner; not a TryLock
	since     time.Time       // when the first attempt found the lock held
	sub       *wake.Sub       // the lock's wake-up subscription, once joined
	queued    bool            // an answered attempt left owner in a queue
	queuedAt  time.Time       // when the first attempt that queued owner was sent; zero before
	clock     serverClock     // the server's clock read by the last attempt that queued owner
	entry     *watchdog.Entry // heartbeats keeping owner's place; nil if none
	acquired  bool
	abandoned bool              // owner was released as gone: nothing left to withdraw
	replies   chan acquireReply // attempts' outcomes (see attempt); nil until one runs in a goroutine
	replyMs   int64             // the server's clock in the last failed attempt's reply; 0 if none
}

// next returns the wake-up signal to wait for after the coming attempt, or
// nil before the waiter joined the subscription.
func (w *waiter) next() <-chan struct{} {
	if w.sub == nil {
		return nil
	}
	return w.sub.NextFor(w.owner)
}

// attempt makes one acquire attempt for w.owner and returns the fencing
// token when acquired, else how long nothing changes without a wake-up, in
// milliseconds (see kind.Spec). An error is rueidis's, unwrapped, or
// errGaveUp when ctx ended first.
//
// Under a ctx that never ends, the attempt runs on the caller's goroutine.
// Under any other, it runs in a goroutine of its own that the caller
// leaves at ctx's end: rueidis heeds a ctx's cancellation only for a
// command it sends through its pipeline, and none while it dials a broken
// connection again, which other callers wait for whatever their ctx. When
// the caller gives up before the reply, the attempt's outcome is unknown:
// its owner is released and recorded as gone, in the background, so that
// the acquire, if it lands later, is refused and leaves nothing behind.
func (w *waiter) attempt(ctx context.Context) (token, wait int64, err error) {
	b, c := w.b, w.b.c
	if w.entry != nil {
		// The attempt renews the owner's place itself when it lands.
		// Heartbeats meanwhile would keep the place of a waiter that cannot
		// act — its attempt stuck on a stalled connection while heartbeats
		// pass on another — and hold up every waiter behind it (readers
		// behind a waiting writer, a fair queue behind its head). Without
		// them the place lapses at its deadline; waited renews them after.
		c.wd.Remove(w.entry)
		w.entry = nil
	}
	owner, call := w.owner, b.acquireCall(w.owner, w.wait, w.starving(), !w.tried, w.within)
	w.tried = true
	var v []int64
	if ctx.Done() == nil {
		v, err = b.acquireExec(ctx, owner, call)
	} else if !c.track() {
		err = rueidis.ErrClosing
	} else {
		// within's work, without its allocations: a waiter reuses its
		// reply channel until an attempt is left behind.
		if w.replies == nil {
			w.replies = replyChans.Get().(chan acquireReply)
		}
		go b.acquireIn(c.bgCtx, owner, call, w.replies)
		select {
		case r := <-w.replies:
			v, err = r.v, r.err
		case <-ctx.Done():
			w.replies = nil // the attempt left behind replies there
			err = errGaveUp
		}
	}
	if errors.Is(err, errGaveUp) {
		c.abandon(b, owner, 0, true)
		w.abandoned = true
		return 0, 0, err
	}
	return w.outcome(v, err)
}

// acquireReply is the outcome of an acquire attempt run by acquireIn.
type acquireReply struct {
	v   []int64
	err error
}

// replyChans holds empty reply channels of waiters that left (see
// attempt and leave): Lock under a ctx that can end, the usual case, then
// allocates none.
var replyChans = sync.Pool{New: func() any { return make(chan acquireReply, 1) }}

// acquireIn runs an acquire call of owner in a goroutine that Client.track
// counted, and sends its outcome to reply.
func (b *binding) acquireIn(ctx context.Context, owner string, call luascripts.Call, reply chan<- acquireReply) {
	defer b.c.bg.Done()
	v, err := b.acquireExec(ctx, owner, call)
	reply <- acquireReply{v, err}
}

// acquireExec runs an acquire call of owner. With WithReplicaAck it waits
// for the replicas' acknowledgement in the same round trip, and releases a
// grant that too few acknowledged, returning a *notReplicated error.
func (b *binding) acquireExec(ctx context.Context, owner string, call luascripts.Call) ([]int64, error) {
	c := b.c
	if c.ack.replicas == 0 {
		return c.scripts.Exec(ctx, call).AsIntSlice()
	}
	res, acked, waitErr := c.scripts.ExecWait(ctx, call, c.ack.replicas, c.ack.timeout)
	v, err := res.AsIntSlice()
	if granted, _, _ := luascripts.AcquireReply(v); err != nil || !granted || (waitErr == nil && acked >= int64(c.ack.replicas)) {
		return v, err
	}
	if waitErr != nil && !isRedisErr(waitErr) {
		// Granted, but whether the replicas have it is unknown: a network
		// failure, whose owner the caller abandons as gone.
		return nil, waitErr
	}
	// Granted but not replicated: release it before anyone relies on it.
	// The release is owner-checked, and does not wait for replicas: if a
	// failover loses it, the grant it releases was never acknowledged.
	if _, rerr := b.releaseWith(owner, 0, false); rerr != nil {
		return nil, rerr // a network error: the caller abandons owner as gone
	}
	return nil, &notReplicated{acked: acked, want: c.ack.replicas, err: waitErr}
}

// notReplicated is an acquire whose grant too few replicas acknowledged;
// it was released. It matches ErrNotReplicated.
type notReplicated struct {
	acked int64
	want  int
	err   error // WAIT's own failure, if any
}

func (e *notReplicated) Error() string {
	if e.err != nil {
		return fmt.Sprintf("WAIT failed: %v", e.err)
	}
	return fmt.Sprintf("%d of %d replicas acknowledged the grant", e.acked, e.want)
}

func (e *notReplicated) Is(target error) bool { return target == ErrNotReplicated }

// within runs f on the Client's background context and returns its result,
// unless ctx ends first (errGaveUp) or the Client is closed
// (rueidis.ErrClosing). After errGaveUp, f goes on in the background and its
// result is dropped; Close cancels it and waits for it.
func within[T any](ctx context.Context, c *Client, f func(context.Context) T) (T, error) {
	var zero T
	reply := make(chan T, 1)
	if !c.spawn(func() { reply <- f(c.bgCtx) }) {
		return zero, rueidis.ErrClosing
	}
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		return zero, errGaveUp
	}
}

// outcome reads an attempt's reply. After a network error, whether the
// attempt ran is unknown: w.owner is abandoned as gone and the waiter goes
// on as a new owner.
func (w *waiter) outcome(v []int64, err error) (token, wait int64, _ error) {
	granted, n, ok := luascripts.AcquireReply(v)
	if err == nil && !ok {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		if !isRedisErr(err) && !errors.Is(err, rueidis.ErrClosing) && !errors.Is(err, ErrNotReplicated) {
			w.restart(true)
		}
		return 0, 0, err
	}
	if granted {
		return n, 0, nil
	}
	spec := w.b.spec
	if w.wait && spec.Heartbeat != luascripts.None && (spec.QueueAfter == 0 || luascripts.Queued(v)) {
		w.queued = true
	}
	w.replyMs, _ = luascripts.ServerMs(v)
	if w.sub != nil {
		w.sub.Queued(w.owner, luascripts.Queued(v))
	}
	return 0, n, nil
}

// starvesAt is when w, a Lock not queued yet of a kind that queues
// waiters once they starve, starts starving; zero otherwise.
func (w *waiter) starvesAt() time.Time {
	after := w.b.spec.QueueAfter
	if !w.wait || w.queued || after == 0 || w.b.spec.Heartbeat == luascripts.None || w.since.IsZero() {
		return time.Time{}
	}
	return w.since.Add(after)
}

// starving reports whether w's attempts queue its owner when not granted:
// always for a kind whose waiters queue at once, else once w has waited
// the kind's QueueAfter (kind.Starving). Before that an attempt queues the
// owner only behind waiters queued already, and its reply says whether it
// did (luascripts.Queued).
func (w *waiter) starving() bool {
	after := w.b.spec.QueueAfter
	return after == 0 || (!w.since.IsZero() && time.Since(w.since) >= after)
}

// restart abandons w.owner — in the background; recorded as gone when an
// attempt of it went unanswered — and makes the waiter a new owner, which
// starts from the back of any queue.
func (w *waiter) restart(gone bool) {
	w.b.c.abandon(w.b, w.owner, 0, gone)
	w.forget()
	w.owner = w.b.c.newOwner()
	w.tried = false
	w.queuedAt = time.Time{}
	w.clock = serverClock{}
}

// forget drops what keeps w.owner waiting locally: its wake-up signal and
// its heartbeats.
func (w *waiter) forget() {
	if w.sub != nil {
		w.sub.Forget(w.owner)
	}
	if w.entry != nil {
		w.b.c.wd.Remove(w.entry)
		w.entry = nil
	}
	w.queued = false
}

// waited records a failed attempt sent at sent, which queued the owner if
// the kind queues waiters: the watchdog keeps its place from then on.
func (w *waiter) waited(sent time.Time) {
	b := w.b
	if !w.queued {
		return
	}
	if w.queuedAt.IsZero() {
		w.queuedAt = sent
	}
	if w.replyMs > 0 {
		w.clock = serverClock{sent: sent, serverMs: w.replyMs}
	}
	if w.entry != nil && b.c.wd.Confirm(w.entry, sent) {
		return
	}
	// First wait, or the place was lost (purged) and the attempt took a new one.
	w.entry = watchdog.NewEntry(luascripts.HeartbeatCall(b.spec.Heartbeat, b.keys, w.owner, b.waiterMs, b.c.publish), b.waiterTimeout, true, sent, func(error) {})
	b.c.wd.Add(w.entry)
}

// leave ends the wait: the subscription, the heartbeats, and the owner's
// place in the queue if it did not acquire. It never waits for Redis.
func (w *waiter) leave() {
	queued := w.queued
	if w.replies != nil {
		// Every attempt sent there was answered: the channel is empty.
		replyChans.Put(w.replies)
		w.replies = nil
	}
	w.forget()
	if w.sub != nil {
		w.sub.Leave()
	}
	if queued && !w.acquired && !w.abandoned {
		w.b.c.abandon(w.b, w.owner, 0, false)
	}
}

// wait sleeps until next fires, d passes, ctx ends (its error) or the Client
// closes (ErrClosed).
func (b *binding) wait(ctx context.Context, next <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-next:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-b.c.done:
		return b.errorf(ErrClosed, "lock: the Client closed while waiting")
	}
}

// reenter adds a lease to h, which ctx carries. The re-entry refreshes the
// hold with the hold's own lease, never the lease this binding was made
// with: a re-entry never shortens the hold.
func (b *binding) reenter(ctx context.Context, h *hold) (*Lease, error) {
	if b.spec.Reenter == luascripts.None {
		return nil, b.errorf(ErrWouldDeadlock, "lock: this call chain holds it already")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.err(); err != nil {
		return nil, err
	}
	count := h.count + 1
	sent := time.Now()
	call := luascripts.ReenterCall(h.b.spec.Reenter, h.b.keys, h.owner, h.b.ms, count)
	type result struct {
		n   int64
		err error
	}
	r, err := within(ctx, b.c, func(bg context.Context) result {
		n, err := b.c.scripts.Exec(bg, call).AsInt64()
		return result{n, err}
	})
	if errors.Is(err, errGaveUp) {
		return nil, b.wrap("lock (re-entry)", ctxErr(ctx))
	}
	if err == nil {
		err = r.err
	}
	n := r.n
	if err != nil {
		// Whether Redis counted the re-entry is unknown. The count it
		// records only informs HoldCount: the hold's next release names
		// its count again, and its last deletes the lock whatever it is.
		return nil, b.wrap("lock (re-entry)", err)
	}
	if n != luascripts.Held {
		err := b.errorf(ErrLockLost, "lock (re-entry): the lock is not held any more")
		h.stop(err, nil)
		return nil, err
	}
	if !b.c.wd.Confirm(h.entry, sent) {
		// The watchdog has just found the hold lost, or Close ended it,
		// and is ending it: its cause, never a nil lease and nil error.
		return nil, h.wait()
	}
	if !time.Now().Before(h.entry.ValidUntil()) {
		err := b.errorf(ErrLockLost, "lock (re-entry): confirmed after the hold's validity passed")
		h.stop(err, nil)
		return nil, err
	}
	h.count = count
	return newLease(ctx, h), nil
}
