// Package rwlock provides a distributed read-write lock: many readers or
// one writer, phase-fair like sync.RWMutex: neither readers nor writers
// starve.
//
// A writer that waits blocks readers that come after it, so a stream of
// overlapping readers cannot starve writers; readers already inside finish,
// then the writer enters. A writer's release lets in every reader waiting
// at that moment before the next writer, who waits for them, so a stream
// of writers cannot starve readers either: a reader waits out at most the
// hold under way and the one after it. Both sides are reentrant down the
// call chain (ownership travels in ctx): a reader re-entering its read lock
// is admitted even while a writer waits, since refusing it would deadlock.
// A writer may take the read lock in its own call chain (downgrade): when
// it then unlocks the write side it stays a reader and other readers may
// join. A reader asking for the write lock in its own call chain gets
// relock.ErrWouldDeadlock at once (upgrade would wait for itself).
//
// Waiting writers queue and take the lock in arrival order, so no writer
// starves behind later writers either. The release that leaves the lock
// without holders, with no reader waiting for a writer's release, hands it
// to the first queued writer in the same script and wakes that writer
// alone, with the grant's fencing token (a direct handoff, as the fair
// lock's: its Lock returns on that message, and a granted writer that died
// holds the lock no longer than its waiter timeout); with no writer queued,
// it wakes every waiter and the readers enter. A reader that a writer keeps
// out is recorded in Redis as waiting, for its waiter timeout, renewed by
// its attempts. A writer's release that lets such readers in hands each
// its hold the same way, by name with a fencing token of its own, and
// their RLocks return on that message; one let in that died meanwhile
// holds the lock no longer than its record lasts, and one that gives up
// is withdrawn.
//
// Locks of other kinds with the same name are the same lock: a reentrant
// or fair lock's holder excludes both sides as a writer does, and waiting
// writers queue behind it.
//
// # Safety model
//
// As for package mutex: each hold is an advisory lease renewed by the
// Client's watchdog (or fixed with relock.WithLease) and lost — its
// Context canceled with cause relock.ErrLockLost — when renewal fails for
// longer than the lease. Every reader has its own deadline on the server's
// clock, so a reader that dies releases its hold at its own deadline even
// while other readers keep renewing theirs; expired holds are found in
// O(log n) per operation. A waiting writer keeps its claim with heartbeats
// (see relock.WithWaiterTimeout); one that dies stops blocking readers after
// its deadline. Readers and writers both get fencing tokens from the same
// counter; a resource written only by writers should check the writers'.
package rwlock

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

var (
	readSpec = kind.Spec{
		Kind:    "rwlock",
		Mode:    "read",
		Within:  "write",
		Acquire: luascripts.RWReadAcquire,
		Reenter: luascripts.RWReenter,
		Release: luascripts.RWRelease,
		Renew:   luascripts.RWRenew,
		// A reader kept out by a writer is recorded as waiting (see the
		// package doc). The heartbeat keeps no such record (its next
		// attempt does), but a kind with one is one whose waiters leave a
		// trace: the engine withdraws a reader that gives up, which a
		// writer's release may have let in meanwhile.
		Heartbeat: luascripts.WaiterHeartbeat,
	}
	writeSpec = kind.Spec{
		Kind:      "rwlock",
		Mode:      "write",
		Conflicts: "read",
		Acquire:   luascripts.RWWriteAcquire,
		Reenter:   luascripts.RWReenter,
		Release:   luascripts.RWRelease,
		Renew:     luascripts.RWRenew,
		Heartbeat: luascripts.WaiterHeartbeat,
	}
)

// RWMutex is a distributed read-write lock. An RWMutex is cheap, holds no
// connection and is safe for concurrent use; RWMutexes of the same name on
// Clients with the same key prefix are the same lock.
type RWMutex struct {
	r, w kind.Lock[*relock.Lease]
	name string
}

// New returns the read-write lock called name on c. Besides relock.WithLease
// it takes relock.WithWaiterTimeout (how long a dead waiting writer keeps
// blocking readers). Any non-empty byte string is a valid name; an empty
// name, a nil c or an invalid option makes every method fail with
// relock.ErrInvalid.
func New(c *relock.Client, name string, opts ...relock.LockOption) *RWMutex {
	return &RWMutex{
		r:    kind.New[*relock.Lease](c, name, &readSpec, opts),
		w:    kind.New[*relock.Lease](c, name, &writeSpec, opts),
		name: name,
	}
}

// Name returns the name of the lock.
func (m *RWMutex) Name() string { return m.name }

// Lock acquires the write lock, waiting until no reader or writer holds it
// or ctx ends; while it waits, new readers are held back. With a ctx that
// holds the write lock it re-enters. The caller must Unlock the lease.
//
// Lock fails with relock.ErrWouldDeadlock when ctx holds the read lock
// (upgrade); relock.ErrNotAcquired joined with ctx.Err() when ctx ends
// first; relock.ErrLockLost when ctx carries a hold that Redis no longer
// has; relock.ErrClosed when the Client is or becomes closed;
// relock.ErrInvalid for an invalid name or option; or with the Redis error
// that stopped it.
func (m *RWMutex) Lock(ctx context.Context) (*relock.Lease, error) { return m.w.Lock(ctx) }

// TryLock makes one attempt at the write lock, in one round trip, and fails
// with relock.ErrNotAcquired when anyone holds the lock; it fails as Lock
// does besides.
func (m *RWMutex) TryLock(ctx context.Context) (*relock.Lease, error) { return m.w.TryLock(ctx) }

// RLock acquires a read lock, waiting while a writer holds the lock or
// waits for it, or until ctx ends. With a ctx that holds a read lock it
// re-enters, even while a writer waits; with a ctx that holds the write
// lock it is granted at once (downgrade). The caller must Unlock the lease.
// RLock fails as Lock does, except that it never reports ErrWouldDeadlock.
func (m *RWMutex) RLock(ctx context.Context) (*relock.Lease, error) { return m.r.Lock(ctx) }

// TryRLock makes one attempt at a read lock, in one round trip, and fails
// with relock.ErrNotAcquired when a writer holds the lock or waits for it;
// it fails as RLock does besides.
func (m *RWMutex) TryRLock(ctx context.Context) (*relock.Lease, error) { return m.r.TryLock(ctx) }

// RLocker returns a relock.Locker whose Lock and TryLock are RLock and
// TryRLock.
func (m *RWMutex) RLocker() relock.Locker { return m.r }

// Locker returns a relock.Locker whose Lock and TryLock are Lock and
// TryLock.
func (m *RWMutex) Locker() relock.Locker { return m.w }

// The lockers RLocker and Locker return.
var _ relock.Locker = kind.Lock[*relock.Lease]{}

// IsLocked reports whether anyone holds the lock: readers or a writer (or
// a lock of another kind with the same name, which excludes both sides).
// A writer that only waits does not make it locked. The answer may be stale
// by the time IsLocked returns. It fails with relock.ErrInvalid for an
// invalid name or option, relock.ErrClosed when the Client is closed, or
// with the Redis error.
func (m *RWMutex) IsLocked(ctx context.Context) (bool, error) { return m.w.IsLocked(ctx) }

// ForceUnlock deletes the lock whoever holds it — every reader, or the
// writer — wakes its waiters, and reports whether it was held. It is an
// administrative action: each holder's Client is sent a loss notice, and
// the holder's lease Context ends at once with cause relock.ErrLockLost;
// a notice that is lost (pub/sub is at-most-once) leaves it to the
// holder's next renewal, which finds its hold gone. Waiting writers keep
// their places. It fails as IsLocked does.
func (m *RWMutex) ForceUnlock(ctx context.Context) (bool, error) { return m.w.ForceUnlock(ctx) }

// HoldCount returns how many leases of the lock the call chain of ctx holds,
// as Redis records them: its read leases, its write leases, or both added
// together when a writer took the read lock in its chain (downgrade). It is
// 0 when ctx carries no hold of the lock or when Redis no longer has it (the
// lease was lost or force-unlocked). It fails as IsLocked does.
func (m *RWMutex) HoldCount(ctx context.Context) (int, error) {
	w, err := m.w.HoldCount(ctx)
	if err != nil {
		return 0, err
	}
	r, err := m.r.HoldCount(ctx)
	if err != nil {
		return 0, err
	}
	return w + r, nil
}
