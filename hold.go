package relock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relockgo/relock/watchdog"
)

// A hold is one owner's possession of a lock, from its first acquisition to
// the Unlock of its last lease. The Leases of its re-entries share it. This
// file is the one place where a hold begins (grant) and ends (stop).
type hold struct {
	// Written once by grant, before the hold is shared.
	b     *binding
	owner string
	token int64
	entry *watchdog.Entry
	since time.Time // when the grant was sent
	first *Lease    // the Lock's own lease; its Context carries the hold

	ended atomic.Bool // stop or end ran: the hold owns nothing any more

	// released is the cause of the Contexts that the last Unlock ends
	// before its release (end); used only by that Unlock.
	released unlockCause

	// mu serializes the hold's re-entries and releases, and is held across
	// their round trip: the hold count they name must reach Redis in the
	// order they were made.
	mu    sync.Mutex
	count int // guarded by mu: leases not yet unlocked

	// lmu guards what follows; it is never held across I/O, and stop takes
	// it with or without mu held. stop cancels the leases' Contexts under
	// it, which runs no caller code: the context package cancels children
	// itself and runs context.AfterFunc's functions in goroutines of their
	// own.
	lmu     sync.Mutex
	cause   error               // why the hold ended; nil while it lasts
	endedCh chan struct{}       // closed by stop; made only for a caller that waits
	leases  map[*Lease]struct{} // re-entries' leases not unlocked; made on the first
}

// grant makes the hold and first lease of owner, which acquired the lock
// with token by a command sent at sent, or, with handed not zero, to which
// another owner's release handed the lock over (see waiter.handedOver),
// certainly held until handed and renewed when a third of that has
// passed. It fails with ErrClosed when the
// Client closed meanwhile (the lock is then released), and returns a nil
// lease and nil error when the grant came too late to be used: its validity
// had passed by the time the reply arrived (the lock is then released in
// the background), so that Lock never hands out a lease that is not
// certainly held.
func (b *binding) grant(ctx context.Context, owner string, token int64, sent, handed time.Time) (*Lease, error) {
	h := &hold{b: b, owner: owner, token: token, since: sent, count: 1}
	l := &Lease{h: h, first: true}
	// The first lease's Context is the hold's: it carries the hold down the
	// call chain and ends with it, or with the lease's Unlock before the
	// re-entries' (no Context of its own, no goroutine to end it).
	l.ctx, l.cancel = context.WithCancelCause(withHold(ctx, h))
	h.first = l
	lost := func(why error) {
		if hook := lostHook.Load(); hook != nil {
			(*hook)()
		}
		h.stop(b.errorf(ErrLockLost, "%v", why), nil)
	}
	h.entry = b.place.entry(owner, token, sent, handed, lost)
	if !time.Now().Before(h.entry.ValidUntil()) {
		// The reply took longer than the lease: another owner may hold
		// the lock already. Ours is released behind it (owner-checked).
		l.cancel(context.Canceled)
		b.c.abandon(b, owner, 0, false)
		return nil, nil
	}
	c := b.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		l.cancel(context.Canceled)
		c.abandon(b, owner, 0, false)
		return nil, b.errorf(ErrClosed, "lock: the Client closed while acquiring")
	}
	c.holds[h] = struct{}{}
	c.mu.Unlock()
	c.hub.Listen() // for a loss notice; Unlisten in stop
	if !c.wd.Add(h.entry) {
		// Close came between: it ends and releases h.
		return nil, b.errorf(ErrClosed, "lock: the Client closed while acquiring")
	}
	return l, nil
}

// lostHook, when set (by tests only), runs when the watchdog found a hold
// lost, before the hold ends.
var lostHook atomic.Pointer[func()]

// stopHook, when set (by tests only), runs in the first stop of a hold
// once the hold's cause is set, before stop has finished.
var stopHook atomic.Pointer[func()]

// entry is the watchdog entry of owner's hold on one master: renewed every
// third of the lease with the kind's renewal script unless the lease is
// fixed; a hand-over's until handed first.
func (m master) entry(owner string, _ int64, sent, handed time.Time, lost func(error)) *watchdog.Entry {
	b := m.b
	if !handed.IsZero() {
		return watchdog.NewHandedEntry(b.renewCall(owner), b.lease, handed, lost)
	}
	return watchdog.NewEntry(b.renewCall(owner), b.lease, !b.fixed, sent, lost)
}

// stop ends the hold with cause: context.Canceled after its last Unlock
// (released says how that release went), ErrLockLost when it was lost. The
// watchdog stops keeping it and Close stops tracking it. It does not touch
// Redis. Calls after the first do nothing.
func (h *hold) stop(cause, released error) {
	h.lmu.Lock()
	if h.cause != nil {
		h.lmu.Unlock()
		return
	}
	h.ended.Store(true)
	// Every lease's Context is done before the cause is set, in the same
	// critical section: whoever finds the hold ended under lmu (Extend, an
	// Unlock, a re-entry, wait, a stop that came second and returns at
	// once) finds its Contexts done, though this stop has not returned
	// yet. A lease unlocked already, or ended by the last Unlock (end),
	// keeps its cause (a second cancel does nothing).
	h.first.cancel(cause)
	for l := range h.leases {
		l.cancel(cause)
	}
	h.cause = cause
	h.leases = nil
	if h.endedCh != nil {
		close(h.endedCh)
	}
	h.lmu.Unlock()
	if hook := stopHook.Load(); hook != nil {
		(*hook)()
	}
	c := h.b.c
	c.wd.Remove(h.entry)
	c.forget(h)
	c.hub.Unlisten()
	if o := c.obs; o != nil {
		if cause == context.Canceled {
			o.Released(Released{Kind: h.b.kind(), Name: h.b.name, Owner: h.owner, Held: time.Since(h.since), Err: released})
		} else {
			o.Lost(Lost{Kind: h.b.kind(), Name: h.b.name, Owner: h.owner, Held: time.Since(h.since), Cause: cause})
		}
	}
}

// unlockCause is the cause of a hold's Contexts ended by its last Unlock
// before the release was sent: context.Canceled, and ErrLockLost as well
// once the release found that the lock was no longer the owner's (then
// the call chain's work may have overlapped another holder's, as with any
// loss). Its outcome is set before the hold's stop, so that whoever is
// told of the Unlock's result sees it.
type unlockCause struct {
	lost atomic.Pointer[error] // the release's ErrLockLost, once found
}

func (c *unlockCause) Error() string {
	if err := c.lost.Load(); err != nil {
		return (*err).Error()
	}
	return context.Canceled.Error()
}

// Is reports whether target is context.Canceled, or ErrLockLost after the
// release found the lock lost.
func (c *unlockCause) Is(target error) bool {
	return target == context.Canceled || (target == ErrLockLost && c.lost.Load() != nil)
}

// Unwrap returns the release's loss, if it found one.
func (c *unlockCause) Unwrap() error {
	if err := c.lost.Load(); err != nil {
		return *err
	}
	return nil
}

// end makes the hold own nothing any more and ends every lease's Context
// with cause, ahead of stop: the last Unlock calls it before its release
// is sent. stop still runs after it.
func (h *hold) end(cause error) {
	h.ended.Store(true)
	h.lmu.Lock()
	leases := make([]*Lease, 0, len(h.leases))
	for l := range h.leases {
		leases = append(leases, l)
	}
	h.lmu.Unlock()
	h.first.cancel(cause)
	for _, l := range leases {
		l.cancel(cause)
	}
}

// err returns why the hold ended (see stop), or nil while it lasts.
func (h *hold) err() error {
	h.lmu.Lock()
	defer h.lmu.Unlock()
	return h.cause
}

// wait waits until the hold has ended and returns why.
func (h *hold) wait() error {
	h.lmu.Lock()
	if h.cause != nil {
		h.lmu.Unlock()
		return h.cause
	}
	if h.endedCh == nil {
		h.endedCh = make(chan struct{})
	}
	ch := h.endedCh
	h.lmu.Unlock()
	<-ch
	return h.err()
}

// forget drops h from the holds Close releases.
func (c *Client) forget(h *hold) {
	c.mu.Lock()
	delete(c.holds, h)
	c.mu.Unlock()
}

// Ownership travels in a ctx: a Lease's Context carries a chain of the holds
// it and the leases it was taken under own. Lock of the same lock with such
// a ctx re-enters instead of waiting for itself. Ownership is the ctx, not
// the goroutine: a goroutine handed the ctx owns what it owns.

type ownerKey struct{}

// chain is an immutable list of holds; the newest first.
type chain struct {
	h    *hold
	next *chain
}

// heldBy returns the live hold of side mode of lock key of c that ctx
// carries, if any. A hold that ended (unlocked, lost) owns nothing any more.
func heldBy(ctx context.Context, c *Client, key, mode string) *hold {
	for ch, _ := ctx.Value(ownerKey{}).(*chain); ch != nil; ch = ch.next {
		if b := ch.h.b; b.c == c && b.keys.Lock == key && b.spec.Mode == mode && !ch.h.ended.Load() {
			return ch.h
		}
	}
	return nil
}

// withHold returns a context with the values of ctx but not its
// cancellation (as context.WithoutCancel), that carries h as well as the
// holds ctx carries: the parent of a hold's Context, which outlives the
// Lock call's ctx.
func withHold(ctx context.Context, h *hold) context.Context {
	next, _ := ctx.Value(ownerKey{}).(*chain)
	return &holdValues{values: ctx, chain: chain{h: h, next: next}}
}

// holdValues is what withHold returns: context.WithoutCancel and
// context.WithValue in one allocation with the chain they carry, since a
// hold is made per Lock.
type holdValues struct {
	values context.Context
	chain  chain
}

func (*holdValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*holdValues) Done() <-chan struct{}       { return nil }
func (*holdValues) Err() error                  { return nil }

func (v *holdValues) Value(key any) any {
	if key == (ownerKey{}) {
		return &v.chain
	}
	return v.values.Value(key)
}

func (v *holdValues) String() string { return "relock.withHold" }
