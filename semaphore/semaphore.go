// Package semaphore provides a distributed counting semaphore whose permits
// are leases: size permits in all, each Acquire holding n of them until its
// lease is unlocked or lost.
//
// A holding of n permits is a relock.Lease like a lock's: renewed by the
// Client's watchdog (or fixed with relock.WithLease and extended with
// Lease.Extend), fenced with a token strictly increasing across the
// semaphore's grants, and its Context canceled with cause
// relock.ErrLockLost when the holding is lost. Never more than size
// permits are held at once, in Redis's view.
//
// Waiters are served in arrival order, as golang.org/x/sync/semaphore
// serves them: a waiter for n permits is never overtaken by a later waiter
// for fewer. A release hands the permits it frees to as many waiters at
// the head of the queue as now fit, in the same script, and wakes exactly
// those, by name, with their grant's token: their Acquire returns on the
// message, with no round trip of its own. TryAcquire never jumps the
// queue. A waiter keeps its place with heartbeats that the Client's
// watchdog sends; one that dies is purged after relock.WithWaiterTimeout
// (5s by default), one whose ctx ends withdraws at once: in the background,
// landing a round trip or so after its Acquire returned, and giving back
// any permits a release handed it meanwhile.
//
// # Safety model
//
// A semaphore is advisory: it limits relock holders, not other users of the
// resource. A permit is a lease: when its holder stops renewing it — the
// process died, paused, or was cut off from Redis for longer than its
// lease — the holding expires and its permits go to others (to the
// waiters queued first). The old holder learns this from its lease's
// Context, but only when its process runs again, so work already under way
// may overlap a new holder's; pass Lease.Token to the resource and have it
// reject a token lower than one it has seen (tokens increase with each
// grant, whichever holding it is).
//
// The semaphore lives on one Redis master. Replication is asynchronous: a
// failover can lose holdings just granted, and more than size permits may
// then be held until those holders' renewals find their holdings gone
// (relock.WithReplicaAck narrows that window). Fencing tokens keep
// increasing across a failover or a restart (the server's clock is their
// floor).
//
// # Size
//
// Every caller of a semaphore must give the same size. While any permit is
// held, an Acquire or TryAcquire giving another size fails with
// relock.ErrInvalid: the semaphore never admits more than the size its
// permits are held under. With no permit held, the next caller's size
// holds.
//
// # Not reentrant
//
// Each Acquire is a holding of its own: an Acquire whose ctx carries a
// holding of the same semaphore takes new permits, and waits for them if
// they are not free (a call chain that holds all the permits and asks for
// one more waits for itself until its ctx ends). Acquire every permit a
// call chain needs in one call, and pass the lease down.
package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

// Semaphore is a distributed counting semaphore of size permits. Create
// Semaphores with New; a Semaphore is cheap, holds no connection and is
// safe for concurrent use. Semaphores of the same name on Clients with the
// same key prefix are the same semaphore. The zero Semaphore is not usable.
type Semaphore struct {
	c    *relock.Client
	name string
	size int64
	opts []relock.LockOption
	err  error // a bad size: every call fails with it

	// one is the semaphore bound to ask for one permit, the common case,
	// made with the Semaphore (its spec lives in it: no allocation more);
	// its ForceUnlock and Query are every binding's.
	one     kind.Lock[*relock.Lease]
	oneSpec spec

	mu     sync.Mutex
	byWant map[int64]kind.Lock[*relock.Lease] // guarded by mu: the binding that asks for n > 1 permits
}

// New returns the semaphore called name on c, of size permits. Besides
// relock.WithLease it takes relock.WithWaiterTimeout. Any non-empty byte
// string is a valid name; an empty name, a nil c, an invalid option or a
// size below 1 makes every method fail with relock.ErrInvalid.
func New(c *relock.Client, name string, size int64, opts ...relock.LockOption) *Semaphore {
	s := &Semaphore{c: c, name: name, size: size, opts: opts}
	if size < 1 {
		s.err = fmt.Errorf("%w: semaphore %s: size %d is below 1", relock.ErrInvalid, strconv.Quote(name), size)
	}
	s.oneSpec.init(1, size)
	s.one = kind.New[*relock.Lease](c, name, &s.oneSpec.Spec, opts)
	return s
}

// spec is the kind of a semaphore whose Acquire asks for a number of
// permits, with the acquire ARGV it names them by: one allocation.
type spec struct {
	kind.Spec
	args [2]string // permits wanted, size: Spec.AcquireArgs
}

// init makes sp the kind of a semaphore of size whose Acquire asks for n
// permits.
func (sp *spec) init(n, size int64) {
	sp.args = [2]string{strconv.FormatInt(n, 10), strconv.FormatInt(size, 10)}
	sp.Spec = kind.Spec{
		Kind:        "semaphore",
		Unshared:    true,
		Acquire:     luascripts.SemaphoreAcquire,
		Release:     luascripts.SemaphoreRelease,
		Renew:       luascripts.SemaphoreRenew,
		Heartbeat:   luascripts.WaiterHeartbeat,
		AcquireArgs: sp.args[:],
	}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Size returns the number of permits the semaphore was made with.
func (s *Semaphore) Size() int64 { return s.size }

// bound returns the semaphore bound to ask for n permits, or the error
// every call with n fails with.
func (s *Semaphore) bound(n int64) (kind.Lock[*relock.Lease], error) {
	switch {
	case s.err != nil:
		return kind.Lock[*relock.Lease]{}, s.err
	case n < 1 || n > s.size:
		return kind.Lock[*relock.Lease]{}, fmt.Errorf("%w: semaphore %s: %d permits asked of %d", relock.ErrInvalid, strconv.Quote(s.name), n, s.size)
	case n == 1:
		return s.one, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.byWant[n]
	if !ok {
		if s.byWant == nil {
			s.byWant = map[int64]kind.Lock[*relock.Lease]{}
		}
		sp := new(spec)
		sp.init(n, s.size)
		l = kind.New[*relock.Lease](s.c, s.name, &sp.Spec, s.opts)
		s.byWant[n] = l
	}
	return l, nil
}

// Acquire joins the queue and waits until n permits are granted to this
// caller or ctx ends, and returns the lease holding them; the caller must
// Unlock it, which gives the permits back. ctx bounds only the wait: when
// it ends, the caller leaves the queue, and its end after Acquire returned
// gives nothing back. A ctx carrying a lease of this semaphore does not
// change that: the permits asked for are new ones (see the package doc).
//
// Acquire fails at once with relock.ErrInvalid when n is below 1 or above
// the size, the size is below 1, or the name or an option is invalid; with
// relock.ErrInvalid when permits are held under another size; with
// relock.ErrNotAcquired joined with ctx.Err() when ctx ends while the
// permits are not free; relock.ErrClosed when the Client is or becomes
// closed; or with the Redis error that stopped it.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*relock.Lease, error) {
	l, err := s.bound(n)
	if err != nil {
		return nil, err
	}
	lease, err := l.Lock(ctx)
	return lease, s.invalid(err)
}

// TryAcquire makes one attempt, in one round trip, without joining the
// queue: it acquires n permits only when they are free and nobody waits,
// and fails with relock.ErrNotAcquired otherwise; it fails as Acquire does
// besides.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (*relock.Lease, error) {
	l, err := s.bound(n)
	if err != nil {
		return nil, err
	}
	lease, err := l.TryLock(ctx)
	return lease, s.invalid(err)
}

// Available returns how many permits are free now: the size less the
// permits held. Holdings whose lease expired count as free (their permits
// go to the waiters queued, if any). It fails with relock.ErrInvalid when
// permits are held under another size (or for an invalid size, name or
// option), relock.ErrClosed when the Client is closed, or with Redis's
// error.
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.one.Query(ctx, luascripts.SemaphoreAvailable, strconv.FormatInt(s.size, 10))
	if err != nil {
		if invalid := s.invalid(err); invalid != err {
			return 0, invalid
		}
		if !errors.Is(err, relock.ErrInvalid) && !errors.Is(err, relock.ErrClosed) {
			err = fmt.Errorf("relock: semaphore %s: available: %w", strconv.Quote(s.name), err)
		}
		return 0, err
	}
	return n, nil
}

// ForceUnlock frees every permit of the semaphore whoever holds it, wakes
// its waiters (those first in the queue acquire), and reports whether any
// permit was held. The queue is kept. It is an administrative action: each
// holder's Client is sent a loss notice, and the holder's lease Context
// ends at once with cause relock.ErrLockLost; a notice that is lost
// (pub/sub is at-most-once) leaves it to the holder's next renewal, which
// finds the holding gone.
func (s *Semaphore) ForceUnlock(ctx context.Context) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	return s.one.ForceUnlock(ctx)
}

// invalid returns err as relock.ErrInvalid when it is a script's refusal
// of the caller's size (luascripts.InvalidCode); err otherwise.
func (s *Semaphore) invalid(err error) error {
	if err == nil {
		return nil
	}
	if msg, ok := luascripts.IsInvalid(err); ok {
		return fmt.Errorf("%w: semaphore %s: %s", relock.ErrInvalid, strconv.Quote(s.name), msg)
	}
	return err
}
