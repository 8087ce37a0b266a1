package relock

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A Lease is a held lock: one successful Lock or TryLock. The caller must
// Unlock it. Re-entries of a lock in its call chain get Leases of their own,
// with the same Token: together they are one hold of the lock, released when
// the last of them is unlocked, in any order.
//
// A Lease is safe for concurrent use. The zero Lease is not usable: Leases
// come from Lock and TryLock. Its Unlock and Extend fail with ErrInvalid,
// and its other methods return zero values and a done Context.
type Lease struct {
	h      *hold
	ctx    context.Context
	cancel context.CancelCauseFunc // by Unlock, or by the hold's end (hold.stop)
	first  bool                    // the hold's first lease: not a re-entry

	unlocked bool // guarded by h.mu
}

// newLease returns a re-entry's lease of h, whose Context carries
// lockCtx's values (the hold among them) and ends when the lease is
// unlocked or the hold ends (hold.stop cancels it), whichever is first.
// The first lease of a hold is grant's.
func newLease(lockCtx context.Context, h *hold) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(lockCtx))
	l := &Lease{h: h, ctx: ctx, cancel: cancel}
	h.lmu.Lock()
	defer h.lmu.Unlock()
	if h.cause != nil { // the hold ended meanwhile
		cancel(h.cause)
		return l
	}
	if h.leases == nil {
		h.leases = map[*Lease]struct{}{}
	}
	h.leases[l] = struct{}{}
	return l
}

// Name returns the name of the lock the lease holds, or "" for a nil or
// zero Lease.
func (l *Lease) Name() string {
	if l.isZero() {
		return ""
	}
	return l.h.b.name
}

// Token returns the lease's fencing token. Tokens are strictly increasing per
// lock name across all clients, in the order the lock was granted; the
// re-entries of a hold share its token. Pass the token to the resource the
// lock protects and have it reject writes carrying a token lower than one it
// has seen: that stops a holder that was paused past its lease. It returns
// 0 for a nil or zero Lease.
func (l *Lease) Token() int64 {
	if l.isZero() {
		return 0
	}
	return l.h.token
}

// Context returns a context that carries the lease's ownership and the values
// of the ctx given to Lock, and is done when the lease ends: canceled after
// Unlock, or with cause ErrLockLost (see context.Cause) when the lease was
// lost, or ErrClosed when the Client closed. Pass it down the call chain:
// Lock of the same lock with it re-enters (or fails with ErrWouldDeadlock for
// a plain mutex), and work under it stops when the lock is lost. The
// Context of a nil or zero Lease is done, with cause ErrInvalid.
func (l *Lease) Context() context.Context {
	if l.isZero() {
		return zeroLeaseCtx
	}
	return l.ctx
}

// ValidUntil returns the time, on the local monotonic clock, until which the
// lease is certainly held: its last confirmation by Redis (the sending of the
// acquire or renewal) plus the lease, less an allowance for clock drift. The
// watchdog moves it forward on each renewal. Compare it with time.Now.
//
// A lock that a release handed to its first queued waiter (see the package
// doc) is granted for what was left of the waiter timeout, so that a waiter
// that died holds it no longer: until the watchdog's first renewal, sent
// when a third of that has passed, ValidUntil is the waiter timeout after
// the waiter queued, less drift, and may be sooner than a lease from now.
// It returns the zero time for a nil or zero Lease.
func (l *Lease) ValidUntil() time.Time {
	if l.isZero() {
		return time.Time{}
	}
	return l.h.entry.ValidUntil()
}

// Unlock ends the lease. It is safe to defer and to call from any goroutine;
// it returns within a timeout of its own of a few seconds from its call,
// whatever Redis does, not bound by the ctx given to Lock. The leases of
// one hold (a Lock and its re-entries down the call chain) may be unlocked
// in any order: each Unlock ends one, and the lock is released when the
// last is unlocked. The last ends the hold's Contexts before it sends the
// release, with cause context.Canceled (and ErrLockLost too, should the
// release find the lock lost): once Redis frees the lock the next holder
// runs, and no goroutine of the call chain still sees a live Context.
//
// Unlock returns nil when the lease ended as asked (for the hold's last
// lease: the lock was released); ErrNotHeld when the lease was already
// unlocked, or is nil; ErrInvalid for a zero Lease; ErrLockLost when the
// hold had been lost (the lock was not this owner's any more); ErrClosed
// when Client.Close released it. When Redis does not answer in time,
// Unlock returns that error and the lock expires after its lease; when the
// hold's other calls (a re-entry, another lease's Unlock) keep it waiting
// past its timeout, it returns context.DeadlineExceeded and the release
// goes on in the background. Whatever it returns, the lease's Context is
// done after Unlock.
func (l *Lease) Unlock() error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if l.isZero() {
		return errZeroLease("unlock")
	}
	h := l.h
	// The bound runs from the call: waiting for the hold's other calls
	// counts against it.
	ctx := h.b.c.releaseCtx()
	if !h.mu.TryLock() {
		return l.unlockAfter(ctx)
	}
	defer h.mu.Unlock()
	return l.unlock(ctx)
}

// unlockAfter is Unlock while another call of the hold — a re-entry, an
// Extend, another lease's Unlock — is in its round trip: it waits for
// that call in a goroutine, and returns when the unlock is done or ctx
// ends, whichever is first. In the second case the unlock goes on in the
// background (Close waits for it) under a bound of its own, and Unlock
// returns ctx's error; the lease's Context is done either way.
func (l *Lease) unlockAfter(ctx context.Context) error {
	h := l.h
	c := h.b.c
	done := make(chan error, 1)
	run := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		rctx := ctx
		if ctx.Err() != nil {
			rctx = c.releaseCtx() // its caller left: a bound of its own
		}
		done <- l.unlock(rctx)
	}
	if !c.spawn(run) {
		// Close has begun: it ends the hold, and rc is open until it returns.
		run()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		l.cancel(context.Canceled)
		return h.b.wrap("unlock (it goes on in the background; the lock expires after its lease if it fails)", ctx.Err())
	}
}

// unlock is Unlock with h.mu held, bounded by ctx.
func (l *Lease) unlock(ctx context.Context) error {
	h := l.h
	if l.unlocked {
		// A second Unlock must not end another lease's share of the hold.
		return h.b.errorf(ErrNotHeld, "unlock")
	}
	l.unlocked = true
	defer func() {
		h.lmu.Lock()
		delete(h.leases, l)
		cause := context.Canceled
		if c := h.cause; c != nil && c != context.Canceled {
			cause = c // the hold was lost or closed: its Context says so
		}
		h.lmu.Unlock()
		l.cancel(cause)
	}()
	return h.unlock(ctx)
}

// Extend makes a lease taken with WithLease last at least d from now, if
// its hold is still this owner's: the manual counterpart of the watchdog's
// renewals, for work that turns out to need longer. It never shortens the
// lease, and it extends the whole hold (every lease of it). ValidUntil
// moves forward accordingly. ctx bounds the call.
//
// Extend fails with ErrLockLost when the lock is not this owner's any more,
// or the hold is being lost as it extends (its Context is then canceled
// with that cause; Extend never reports success for an extension that did
// not take), ErrNotHeld after Unlock or for a nil Lease, ErrInvalid for a
// zero Lease, a lease the watchdog renews (taken without WithLease) or a d
// below MinLease, ErrClosed after Client.Close, or with ctx's or Redis's
// error, which leave the lease as it was.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	if l.isZero() {
		return errZeroLease("extend")
	}
	h := l.h
	b := h.b
	switch {
	case !b.fixed:
		return b.errorf(ErrInvalid, "extend: the watchdog renews this lease (it was taken without WithLease)")
	case d < MinLease:
		return b.errorf(ErrInvalid, "extend: %v is below MinLease (%v)", d, MinLease)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.unlocked {
		return b.errorf(ErrNotHeld, "extend")
	}
	if cause := h.err(); cause != nil {
		return cause
	}
	sent := time.Now()
	held, err := b.place.extend(ctx, h.owner, h.token, strconv.FormatInt(d.Milliseconds(), 10))
	switch {
	case err != nil:
		return b.wrap("extend", err)
	case !held:
		err := b.errorf(ErrLockLost, "extend: the lock is not held any more")
		h.stop(err, nil)
		return err
	case !b.c.wd.Extend(h.entry, sent, d):
		// The watchdog has just found the hold lost, or Close ended it,
		// and is ending it: its cause.
		return h.wait()
	}
	return nil
}
