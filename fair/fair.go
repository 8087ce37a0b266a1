// Package fair provides a first-come-first-served distributed lock: waiters
// acquire it in the order they started waiting, across processes.
//
// The lock is a reentrant lock (a Redis hash of owner → hold count; see
// package reentrant: the call chain that holds it may take it again) plus a
// queue of waiting owners in arrival order with their deadlines (one sorted
// set; deadlines on the server's clock, never the client's). A release hands the lock to
// the first waiter in the same script and wakes it with a message carrying
// the grant's fencing token (a direct handoff: no other waiter retries,
// nobody can take the lock between the release and the waiter, and the
// waiter's Lock returns on the message, with no round trip of its own; the
// watchdog extends the grant to its lease). TryLock never jumps the queue.
//
// # Waiters that die or give up
//
// A waiting Lock keeps its place with heartbeats, which the Client's
// watchdog sends for all its waiters in one round trip each interval
// (relock.WithWaiterTimeout / 3). A waiter that stops — its process died or
// lost Redis — is purged once its deadline passes (relock.WithWaiterTimeout,
// 5s by default), and the next live waiter gets the lock; until then the
// waiters behind it wait. A waiter whose ctx ends withdraws at once and, if
// it was first and the lock is free, wakes the next. A grant lasts what
// was left of the waiter's deadline until its watchdog extends it: a
// waiter that died meanwhile holds the lock no longer than its waiter
// timeout, and one whose ctx ended releases it to the next. A waiter that
// misses the message (pub/sub drops messages while reconnecting), one that
// gets it later than the waiter timeout after it queued (it cannot tell
// that the grant is still live), and one with a fixed relock.WithLease
// lease, take the grant up by an attempt. The waiter behind is told how
// long the grant lasts, and does not try before.
//
// # Safety model
//
// As for package mutex: the lock is an advisory lease, renewed by the
// Client's watchdog (or fixed with relock.WithLease) and lost — every lease
// of the hold has its Context canceled with cause relock.ErrLockLost — when
// renewal fails for longer than the lease; a holder whose lease expires
// hands the lock to the first waiter. Order is decided by Redis, so it is
// the order in which waiters' first attempts reached the server. Protect the
// resource with Lease.Token.
package fair

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

var spec = kind.Spec{
	Kind:      "fair",
	Acquire:   luascripts.FairAcquire,
	Reenter:   luascripts.ReentrantReenter,
	Release:   luascripts.FairRelease,
	Renew:     luascripts.Renew,
	Heartbeat: luascripts.WaiterHeartbeat,
}

// Mutex is a first-come-first-served distributed lock that its holder's
// call chain may re-enter. It implements relock.Locker. A Mutex is cheap,
// holds no connection and is safe for concurrent use; Mutexes of the same
// name on Clients with the same key prefix are the same lock.
type Mutex struct {
	l    kind.Lock[*relock.Lease]
	name string
}

var _ relock.Locker = (*Mutex)(nil)

// New returns the fair lock called name on c. Besides relock.WithLease it
// takes relock.WithWaiterTimeout. Any non-empty byte string is a valid name;
// an empty name, a nil c or an invalid option makes every method fail with
// relock.ErrInvalid.
func New(c *relock.Client, name string, opts ...relock.LockOption) *Mutex {
	return &Mutex{l: kind.New[*relock.Lease](c, name, &spec, opts), name: name}
}

// Lock joins the queue and waits until it is this caller's turn and the
// lock is free, or until ctx ends; or it re-enters the lock when ctx carries
// a lease of it. The caller must Unlock the lease. ctx bounds only the wait;
// when it ends, the caller leaves the queue.
//
// Lock fails with relock.ErrNotAcquired joined with ctx.Err() when ctx ends
// first; relock.ErrLockLost when ctx carries a hold that Redis no longer
// has; relock.ErrClosed when the Client is or becomes closed;
// relock.ErrInvalid for an invalid name or option; or with the Redis error
// that stopped it.
func (m *Mutex) Lock(ctx context.Context) (*relock.Lease, error) { return m.l.Lock(ctx) }

// TryLock makes one attempt, in one round trip, without joining the queue:
// it acquires the lock only when it is free and nobody waits for it (or
// re-enters it when ctx carries a lease of it), and fails with
// relock.ErrNotAcquired otherwise; it fails as Lock does besides.
func (m *Mutex) TryLock(ctx context.Context) (*relock.Lease, error) { return m.l.TryLock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.l.IsLocked(ctx) }

// ForceUnlock deletes the lock whoever holds it, wakes its waiters (the
// first one acquires), and reports whether it was held. The queue is kept.
// It is an administrative action: the holder's Client is sent a loss notice,
// and the holder's leases' Contexts end at once with cause
// relock.ErrLockLost; a notice that is lost (pub/sub is at-most-once) leaves
// it to the holder's next renewal, which finds the lock gone.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l.ForceUnlock(ctx) }

// HoldCount returns how many holds the owner carried by ctx has on the lock,
// as Redis records them: 0 when ctx carries no lease of this lock or its hold
// was lost.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) { return m.l.HoldCount(ctx) }

// Name returns the name of the lock.
func (m *Mutex) Name() string { return m.name }
