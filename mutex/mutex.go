// Package mutex provides the plain distributed mutex of relock: one Redis
// string per lock, set only when free (SET NX PX) and deleted only by its
// owner.
//
// # Safety model
//
// A mutex is advisory: it excludes other relock holders, not other writers.
// Its lease is renewed by the Client's watchdog (or fixed with
// relock.WithLease); when the holder stops renewing — it died, paused, or was
// cut off from Redis for longer than its lease — the lock expires and another
// owner may take it. The old holder learns this from its lease's Context
// (canceled with cause relock.ErrLockLost), but only when its process runs
// again, so work already under way may overlap the next holder's. Pass
// Lease.Token to the resource you protect and have it reject lower tokens.
//
// The lock lives on one Redis master. Redis replication is asynchronous: a
// failover can lose a lock that was just granted, and two owners then hold
// it. Fencing tokens are issued with the server's clock as a floor, so they
// keep increasing across such a failover or a restart without persistence.
//
// A mutex is not reentrant: Lock with a ctx that already holds this mutex
// fails at once with relock.ErrWouldDeadlock. Use package reentrant for a
// lock that nested calls may take again.
package mutex

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

var spec = kind.Spec{
	Kind:    "mutex",
	Acquire: luascripts.MutexAcquire,
	Renew:   luascripts.Renew,
	Release: luascripts.MutexRelease,
	// Waiters that starve queue (see kind.Starving).
	Heartbeat:  luascripts.WaiterHeartbeat,
	QueueAfter: kind.Starving,
}

// Mutex is a plain distributed mutex. It implements relock.Locker. Create
// Mutexes with New; a Mutex is cheap, holds no connection and is safe for
// concurrent use. Mutexes of the same name on Clients with the same key prefix
// are the same lock.
type Mutex struct {
	l    kind.Lock[*relock.Lease]
	name string
}

var _ relock.Locker = (*Mutex)(nil)

// New returns the mutex called name on c. Any non-empty byte string is a
// valid name; an empty name, a nil c or an invalid option makes every method
// fail with relock.ErrInvalid.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Mutex {
	return &Mutex{l: kind.New[*relock.Lease](c, name, &spec, opts), name: name}
}

// Lock waits until it acquires the mutex or ctx ends, and returns the lease;
// the caller must Unlock it. ctx bounds only the wait: its end after Lock
// returned does not release the mutex.
//
// Lock fails with relock.ErrNotAcquired joined with ctx.Err() when ctx ends
// while another owner holds the mutex; relock.ErrWouldDeadlock when ctx
// carries a lease of this mutex; relock.ErrClosed when the Client is or
// becomes closed; relock.ErrInvalid for an invalid name or option; or with
// the Redis error that stopped it.
func (m *Mutex) Lock(ctx context.Context) (*relock.Lease, error) { return m.l.Lock(ctx) }

// TryLock makes one attempt to acquire the mutex, in one round trip. It
// fails with relock.ErrNotAcquired when another owner holds it, and
// otherwise as Lock does.
func (m *Mutex) TryLock(ctx context.Context) (*relock.Lease, error) { return m.l.TryLock(ctx) }

// IsLocked reports whether any owner holds the mutex.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	return m.l.IsLocked(ctx)
}

// ForceUnlock deletes the mutex whoever holds it and wakes its waiters, and
// reports whether it was held. It is an administrative action: the holder's
// Client is sent a loss notice, and the holder's lease Context ends at once
// with cause relock.ErrLockLost; a notice that is lost (pub/sub is
// at-most-once) leaves it to the holder's next renewal, which finds the lock
// gone.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	return m.l.ForceUnlock(ctx)
}

// Name returns the name of the lock.
func (m *Mutex) Name() string { return m.name }
