// Package reentrant provides a distributed lock that the call chain holding
// it may take again: a Redis hash of owner → hold count.
//
// Ownership is carried by ctx, not by the goroutine: Lock with the Context
// of a held lease (or any ctx derived from it, in any goroutine) re-enters
// the lock, adding a hold, instead of waiting for itself; each re-entry
// returns a new Lease with the same fencing token. The leases of one hold
// may be unlocked in any order — a call chain may fan out to goroutines
// that finish in any order — and the lock is released when the last of
// them is unlocked. A ctx that does not carry the lock makes a new owner,
// which waits like any other.
//
// # Safety model
//
// As for package mutex: the lock is an advisory lease, renewed by the
// Client's watchdog (or fixed with relock.WithLease), lost when a renewal
// fails for longer than the lease, and then every lease of the hold —
// outermost and nested — has its Context canceled with cause
// relock.ErrLockLost. A re-entry refreshes the hold with the hold's own
// lease, whatever lease the re-entering Mutex was made with, and never
// shortens it. Protect the resource with
// Lease.Token. Hold counts are set, not incremented, by the client that
// knows them, so a re-entry or release retried after a lost reply never
// counts twice.
package reentrant

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

var spec = kind.Spec{
	Kind:    "reentrant",
	Acquire: luascripts.ReentrantAcquire,
	Reenter: luascripts.ReentrantReenter,
	Renew:   luascripts.Renew,
	Release: luascripts.ReentrantRelease,
	// Waiters that starve queue (see kind.Starving).
	Heartbeat:  luascripts.WaiterHeartbeat,
	QueueAfter: kind.Starving,
}

// Mutex is a distributed lock that its holder's call chain may re-enter. It
// implements relock.Locker. A Mutex is cheap, holds no connection and is safe
// for concurrent use; Mutexes of the same name on Clients with the same key
// prefix are the same lock.
type Mutex struct {
	l    kind.Lock[*relock.Lease]
	name string
}

var _ relock.Locker = (*Mutex)(nil)

// New returns the reentrant lock called name on c. Any non-empty byte string
// is a valid name; an empty name, a nil c or an invalid option makes every
// method fail with relock.ErrInvalid.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Mutex {
	return &Mutex{l: kind.New[*relock.Lease](c, name, &spec, opts), name: name}
}

// Lock acquires the lock, waiting until it is free or ctx ends, or re-enters
// it when ctx carries a lease of it. The caller must Unlock the lease. ctx
// bounds only the wait.
//
// Lock fails with relock.ErrNotAcquired joined with ctx.Err() when ctx ends
// while another owner holds the lock; relock.ErrLockLost when ctx carries a
// hold that Redis no longer has; relock.ErrClosed when the Client is or
// becomes closed; relock.ErrInvalid for an invalid name or option; or with
// the Redis error that stopped it.
func (m *Mutex) Lock(ctx context.Context) (*relock.Lease, error) { return m.l.Lock(ctx) }

// TryLock makes one attempt, in one round trip: it acquires a free lock or
// re-enters one that ctx carries, and fails with relock.ErrNotAcquired when
// another owner holds it; otherwise it fails as Lock does.
func (m *Mutex) TryLock(ctx context.Context) (*relock.Lease, error) { return m.l.TryLock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.l.IsLocked(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes its waiters, and
// reports whether it was held. It is an administrative action: the holder's
// Client is sent a loss notice, and the holder's leases' Contexts end at
// once with cause relock.ErrLockLost; a notice that is lost (pub/sub is
// at-most-once) leaves it to the holder's next renewal, which finds the lock
// gone.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l.ForceUnlock(ctx) }

// HoldCount returns how many holds the owner carried by ctx has on the lock,
// as Redis records them: 0 when ctx carries no lease of this lock or its hold
// was lost.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	return m.l.HoldCount(ctx)
}

// Name returns the name of the lock.
func (m *Mutex) Name() string { return m.name }
