// Package kind is the contract between package relock, which runs the one
// locking engine (acquire loop, leases, watchdog, wake-ups), and the lock
// kinds (mutex, reentrant, fair, rwlock, semaphore), which describe themselves to it with
// a Spec.
//
// The kinds import package relock for its public types, so relock cannot
// import them, and they cannot reach its unexported engine. relock therefore
// installs the engine here at init (Register), and kinds bind their locks
// through New. The compiler checks both ends: the kinds' calls of New and
// relock's engine name the same types, and the one value that crosses as an
// any (binder) is checked at the first lock made.
package kind

import (
	"context"
	"fmt"
	"time"

	"github.com/relockgo/relock/luascripts"
)

// Spec describes a lock kind to the engine: its scripts, which the engine
// calls with the same KEYS and ARGV whatever the kind (the ABI is in
// luascripts/abi.go), and how its modes relate.
//
// Expiries of keys that several owners share (queue, readers, gone) are
// only ever lengthened: callers may use different options. Kinds sharing a
// name share its queue: each queued waiter records how a hand-over grants
// it the lock, whichever kind's release makes it.
//
// Hold counts are named by the client, which knows them, so that a call
// retried after a lost reply never counts twice.
type Spec struct {
	// Kind names the kind in errors: "mutex", "reentrant", ….
	Kind string

	// Mode is the side of a lock with two ("read", "write"), or "" for an
	// exclusive kind. A ctx carries holds per lock and mode.
	Mode string
	// Conflicts is a mode whose hold in the caller's ctx makes a Lock of
	// this one a deadlock (a reader asking for the write side): "" for none.
	Conflicts string
	// Within is a mode whose hold in the caller's ctx is passed to Acquire
	// (a writer taking the read side of its own lock): "" for none.
	Within string
	// Unshared makes every Acquire a new owner's: a hold of the lock in the
	// caller's ctx is not re-entered (nor refused with ErrWouldDeadlock),
	// and HoldCount sees none. A semaphore's holdings are so: each is n
	// permits of its own.
	Unshared bool
	// AcquireArgs are ARGV of the kind's own, appended to every acquire
	// call after the ABI's (luascripts.Acquire.Extra): the semaphore's
	// permits wanted and size, one Spec per n. Never modified.
	AcquireArgs []string

	Acquire luascripts.Script
	// Reenter is luascripts.None for a kind that cannot be re-entered: the engine then
	// fails re-entry with ErrWouldDeadlock.
	Reenter luascripts.Script
	Release luascripts.Script
	// Renew extends a held lease; the watchdog batches it.
	Renew luascripts.Script
	// Heartbeat keeps a waiter's place; luascripts.None for a kind whose waiters leave
	// no trace in Redis. The watchdog batches it, every waiter timeout / 3.
	Heartbeat luascripts.Script
	// QueueAfter is how long a Lock waits before it takes a place in the
	// lock's queue: until then its attempts queue it only behind waiters
	// queued already (luascripts.Acquire.Queue). 0 queues every Lock from
	// its first attempt (the fair lock, waiting writers). Only for a kind
	// with a Heartbeat.
	QueueAfter time.Duration
}

// Starving is the QueueAfter of the mutex and the reentrant lock: like
// sync.Mutex, they let newcomers overtake waiters, which keeps a hot lock
// passing quickly, until a waiter has waited this long; it then queues, and
// the lock goes in queue order until the queue is empty. A waiter's wait is
// then bounded by the holds queued before it, however hot the lock.
const Starving = 50 * time.Millisecond

// Binding is one named lock bound to a Client's engine; package relock
// implements it. L is *relock.Lease.
type Binding[L any] interface {
	// Acquire locks, waiting unless try is set.
	Acquire(ctx context.Context, try bool) (L, error)
	// IsLocked reports whether any owner holds the lock.
	IsLocked(ctx context.Context) (bool, error)
	// ForceUnlock deletes the lock whoever holds it, wakes its waiters,
	// and reports whether it was held.
	ForceUnlock(ctx context.Context) (bool, error)
	// HoldCount returns the hold count Redis records for the owner ctx
	// carries: 0 when ctx carries no hold of the lock or Redis no longer
	// has it.
	HoldCount(ctx context.Context) (int, error)
	// Query runs script s, a kind's read of its state, on the lock's keys
	// with args (luascripts.QueryCall) and returns its integer reply.
	Query(ctx context.Context, s luascripts.Script, args ...string) (int64, error)
}

// binder is the engine: a func(*relock.Client, string, *Spec,
// []relock.LockOption) Binding[*relock.Lease], installed by Register at
// package relock's init and read by New. It is an any because this package
// cannot name relock's types; New checks its type, and a mismatch — which
// only a change to one side of this seam and not the other can cause —
// panics at the first lock made.
var binder any

// Register installs the engine. Package relock calls it at init.
func Register[L, C, O any](bind func(c C, name string, spec *Spec, opts []O) Binding[L]) {
	binder = bind
}

// New binds lock name of spec to client c with opts: kind.New[*relock.Lease](c,
// name, &spec, opts), where c is a *relock.Client and opts are
// relock.LockOptions.
func New[L, C, O any](c C, name string, spec *Spec, opts []O) Lock[L] {
	bind, ok := binder.(func(C, string, *Spec, []O) Binding[L])
	if !ok {
		panic(fmt.Sprintf("kind: the registered engine %T does not bind %T with %T to %T", binder, c, opts, *new(L)))
	}
	return Lock[L]{b: bind(c, name, spec, opts)}
}

// multiBinder is the engine of locks held on several masters: a
// func([]*relock.Client, string, *Spec, []relock.LockOption)
// Binding[*relock.Lease], installed and checked as binder is.
var multiBinder any

// RegisterMulti installs the engine of locks held on several masters.
// Package relock calls it at init.
func RegisterMulti[L, C, O any](bind func(cs []C, name string, spec *Spec, opts []O) Binding[L]) {
	multiBinder = bind
}

// NewMulti binds lock name of spec to the masters of clients cs (Redlock):
// kind.NewMulti[*relock.Lease](cs, name, &spec, opts).
func NewMulti[L, C, O any](cs []C, name string, spec *Spec, opts []O) Lock[L] {
	bind, ok := multiBinder.(func([]C, string, *Spec, []O) Binding[L])
	if !ok {
		panic(fmt.Sprintf("kind: the registered engine %T does not bind %T with %T to %T", multiBinder, cs, opts, *new(L)))
	}
	return Lock[L]{b: bind(cs, name, spec, opts)}
}

// Lock is a bound lock whose leases are of type L. It has only the methods
// below: nothing of the engine behind it is reachable through it.
type Lock[L any] struct{ b Binding[L] }

// Lock waits until the lock is acquired or ctx ends.
func (l Lock[L]) Lock(ctx context.Context) (L, error) { return l.b.Acquire(ctx, false) }

// TryLock makes one attempt.
func (l Lock[L]) TryLock(ctx context.Context) (L, error) { return l.b.Acquire(ctx, true) }

// IsLocked reports whether any owner holds the lock.
func (l Lock[L]) IsLocked(ctx context.Context) (bool, error) { return l.b.IsLocked(ctx) }

// ForceUnlock deletes the lock whoever holds it, wakes its waiters, and
// reports whether it was held.
func (l Lock[L]) ForceUnlock(ctx context.Context) (bool, error) { return l.b.ForceUnlock(ctx) }

// HoldCount returns the hold count that Redis records for the owner ctx
// carries, for a lock whose hash maps owners to hold counts: 0 when ctx
// carries no hold of the lock or Redis no longer has it.
func (l Lock[L]) HoldCount(ctx context.Context) (int, error) { return l.b.HoldCount(ctx) }

// Query runs script s, a kind's read of its state, on the lock's keys with
// args, and returns its integer reply, or the error Redis answered.
func (l Lock[L]) Query(ctx context.Context, s luascripts.Script, args ...string) (int64, error) {
	return l.b.Query(ctx, s, args...)
}
