package relock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relockgo/relock/watchdog"
)

// hold is one owner's possession of a lock, from its first acquisition to
// its last release; the Leases of its re-entries share it.
type hold struct {
	b     *binding
	owner string
	token int64
	entry *watchdog.Entry
	ctx   context.Context // done when the hold ends; its cause says why
	end   context.CancelCauseFunc

	mu    sync.Mutex // serializes this hold's re-entries and releases
	depth int        // guarded by mu: leases not yet unlocked
}

// A Lease is a held lock: one successful Lock or TryLock. The caller must
// Unlock it. Re-entries of a lock in its call chain get Leases of their own,
// with the same Token, which are unlocked in reverse order.
//
// A Lease is safe for concurrent use.
type Lease struct {
	h      *hold
	depth  int // this lease's place among its hold's leases, 1 the outermost
	ctx    context.Context
	cancel context.CancelCauseFunc
	detach func() bool // stops forwarding the hold's end to ctx

	unlocked bool // guarded by h.mu
}

func newLease(lockCtx context.Context, h *hold, depth int) *Lease {
	ctx := context.WithoutCancel(lockCtx)
	if depth == 1 {
		ctx = withHold(ctx, h)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	l := &Lease{h: h, depth: depth, ctx: ctx, cancel: cancel}
	l.detach = context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	return l
}

// Name returns the name of the lock the lease holds.
func (l *Lease) Name() string { return l.h.b.name }

// Token returns the lease's fencing token. Tokens are strictly increasing per
// lock name across all clients, in the order the lock was granted; the
// re-entries of a hold share its token. Pass the token to the resource the
// lock protects and have it reject writes carrying a token lower than one it
// has seen: that stops a holder that was paused past its lease.
func (l *Lease) Token() int64 { return l.h.token }

// Context returns a context that carries the lease's ownership and the values
// of the ctx given to Lock, and is done when the lease ends: canceled after
// Unlock, or with cause ErrLockLost (see context.Cause) when the lease was
// lost, or ErrClosed when the Client closed. Pass it down the call chain:
// Lock of the same lock with it re-enters (or fails with ErrWouldDeadlock for
// a plain mutex), and work under it stops when the lock is lost.
func (l *Lease) Context() context.Context { return l.ctx }

// ValidUntil returns the time, on the local monotonic clock, until which the
// lease is certainly held: its last confirmation by Redis (the sending of the
// acquire or renewal) plus the lease, less an allowance for clock drift. The
// watchdog moves it forward on each renewal. Compare it with time.Now.
func (l *Lease) ValidUntil() time.Time { return l.h.entry.ValidUntil() }

// Unlock releases the lease. It is safe to defer and to call from any
// goroutine; it runs under its own timeout of a few seconds, not the ctx
// given to Lock.
//
// Unlock returns nil when the lock was released; ErrNotHeld when the lease
// was already unlocked; ErrLockLost when the lease had been lost (the lock
// was not this owner's any more); ErrClosed when Client.Close released it;
// ErrInvalid when an inner re-entry of the same hold is still locked (leases
// of one call chain unlock in reverse order; the lease stays held). When
// Redis does not answer in time, Unlock returns that error and the lock
// expires after its lease.
func (l *Lease) Unlock() error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", ErrNotHeld)
	}
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.unlocked {
		return h.b.errorf(ErrNotHeld, "unlock")
	}
	if l.depth != h.depth {
		return h.b.errorf(ErrInvalid, "unlock out of order: this lease is at depth %d, its hold at depth %d", l.depth, h.depth)
	}
	l.unlocked = true
	h.depth--
	defer func() {
		l.detach()
		l.cancel(context.Canceled)
	}()

	if l.depth == 1 && !h.b.c.wd.Remove(h.entry) {
		// Lost or closed: the watchdog or Close is ending the hold. A lease
		// that expired locally may still be ours in Redis: free it.
		<-h.ctx.Done()
		if cause := context.Cause(h.ctx); !errors.Is(cause, ErrClosed) {
			h.b.release(h.owner, 1)
		}
		return context.Cause(h.ctx)
	}
	if err := context.Cause(h.ctx); err != nil {
		return err
	}
	held, err := h.b.release(h.owner, l.depth)
	switch {
	case err == nil && !held:
		err = h.b.errorf(ErrLockLost, "unlock: the lock was not held any more")
		h.b.c.wd.Remove(h.entry)
		h.b.c.forget(h)
		h.end(err)
	case l.depth == 1:
		h.b.c.forget(h)
		h.end(context.Canceled)
	}
	return err
}

// release ends the owner's hold at depth (0: all of it), retrying on network
// errors until releaseTimeout, and reports whether the owner held the lock.
// Releases name the depth they end, so a retry whose earlier attempt was
// applied does not count down twice; and a retry that finds the lock gone
// after an attempt with no reply takes that attempt to have released it.
func (b *binding) release(owner string, depth int) (held bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	call := b.releaseCall(owner, depth)
	backoff := 10 * time.Millisecond
	unanswered := false // an earlier attempt may have been applied
	for {
		n, err := exec(ctx, b.c.rc, call).AsInt64()
		if err == nil {
			return n == 1 || unanswered, nil
		}
		if isRedisErr(err) || ctx.Err() != nil {
			return false, b.Wrap("release (the lock expires after its lease)", err)
		}
		unanswered = true
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, b.Wrap("release (the lock expires after its lease)", err)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
