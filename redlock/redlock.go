// Package redlock provides one lock over N independent Redis masters, the
// Redlock algorithm: the lock is held when a majority of the masters
// granted it, within a validity that accounts for the time spent acquiring
// and for clock drift.
//
// Each master is reached through its own *relock.Client (one rueidis client
// of one master: no replicas, no cluster). Lock asks every master at once,
// each within a node timeout far below the lease (relock.WithNodeTimeout;
// lease/50 and at least 5ms by default); it holds the lock when at least
// N/2+1 granted it and validity = lease − elapsed − drift (drift =
// lease/100 + 2ms) is positive, and otherwise releases it on every master —
// those that did not answer in time too, since their grant may land — and
// waits for a release on any master, the shortest expiry seen, or a random
// delay, before it tries again. Use an odd N: N = 5 survives the loss of
// two masters; N = 1 behaves like package mutex.
//
// An attempt that no majority granted tells why: relock.ErrNotAcquired
// when so many masters hold the lock for another owner that no majority
// could have granted it, and relock.ErrUnavailable, wrapping the masters'
// errors, when the masters that did not answer in time could have made
// the majority: too few answered to decide, which never means that
// another owner holds the lock.
//
// In one process, one goroutine at a time asks the masters for a given
// lock (through its first master's Client); the process's other callers
// wait their turn in the process, and TryLock fails with
// relock.ErrNotAcquired while another goroutine is acquiring it.
// Contenders that ask the masters at once split them — each granted by
// some, none by a quorum — and must all release and retry; one contender
// per process keeps a hot lock handing over instead (see the benchmark).
// Redlock waiters do not queue on the masters (the mutex's starvation
// queue, one per master, could order them differently on each): a waiter
// may be overtaken.
//
// Leases are ordinary *relock.Lease values: the first master's Client
// renews them on every master each lease/3 with its watchdog, taking back
// the masters where the lock is free (with their fencing counter raised to
// the lease's token), so a lease granted by a bare majority survives the
// loss of one of its masters while a majority stays reachable. A renewal
// round that no majority confirms before the lease's ValidUntil ends it
// with relock.ErrLockLost, as does a majority of masters reporting another
// owner. Unlock releases on every master. A Lock with a ctx that
// holds the lock fails with relock.ErrWouldDeadlock, as for a mutex.
//
// # Safety model
//
// Redlock is safe while a minority of the masters fails, under three
// assumptions: clocks run at about the same rate (the drift allowance
// covers 1%); a master that crashes either persists every write (AOF with
// appendfsync always) or stays down for at least one lease after it
// restarts (a master that restarts empty at once can grant the lock again
// to a second owner, together with the masters that never saw the first);
// and a holder learns of a loss in time to stop, which no lease lock can
// promise: a holder paused past its lease (GC, SIGSTOP) acts after another
// holds the lock.
//
// So the fencing token is still what the protected resource must check.
// A lease's Token is the largest the granting majority issued, and before
// Lock returns it is written back to that majority (one more parallel
// round trip), so any later majority — which shares a master with this one
// — issues a larger token: tokens keep increasing across grants that land
// on different majorities.
//
// A master that restarts empty forgets the tokens it issued and those
// written back to it, and its counter starts again from its server clock
// (TIME, in µs: every counter has that clock as its floor). Across such
// restarts tokens keep increasing only while the masters' clocks agree
// within one lease. A later majority whose masters shared with the one a
// token was written back to all restarted empty since issues a token from
// its own clocks; by the restart rule above it asks at least a lease after
// that token was issued, so its token is larger unless the clock that
// issued the earlier one led its clocks by more than the time between the
// two grants, which is at least a lease. Keep the masters' clocks
// synchronized (NTP) well within the lease; masters that persist every
// write need no such bound.
//
// Close the Clients of a redlock together, in any order, and close their
// rueidis clients after all of them: the first master's Client tracks the
// redlock's leases, and its Close releases those still held on every
// master, through each master's rueidis client, whether that master's
// Client was closed before it or not.
package redlock

import (
	"context"

	"github.com/relockgo/relock"
	"github.com/relockgo/relock/internal/kind"
	"github.com/relockgo/relock/luascripts"
)

var spec = kind.Spec{
	Kind:    "redlock",
	Acquire: luascripts.MutexAcquire,
	Renew:   luascripts.Renew,
	Release: luascripts.MutexRelease,
}

// Mutex is a lock over several independent Redis masters. It implements
// relock.Locker. A Mutex is cheap, holds no connection and is safe for
// concurrent use; Mutexes of the same name over the same masters (and key
// prefix) are the same lock.
type Mutex struct {
	l    kind.Lock[*relock.Lease]
	name string
}

var _ relock.Locker = (*Mutex)(nil)

// New returns the lock called name over the masters of nodes, one Client
// per independent master. Besides relock.WithLease it takes
// relock.WithNodeTimeout. No nodes, a nil node, the same Client twice,
// Clients with different key prefixes, an empty name or an invalid option
// make every method fail with relock.ErrInvalid.
func New(nodes []*relock.Client, name string, opts ...relock.LockOption) *Mutex {
	return &Mutex{l: kind.NewMulti[*relock.Lease](nodes, name, &spec, opts), name: name}
}

// Lock waits until a majority of the masters granted the lock or ctx ends,
// and returns the lease; the caller must Unlock it. ctx bounds only the
// wait.
//
// Lock fails, when ctx ends, with ctx's error joined with what the last
// attempt that could decide found: relock.ErrNotAcquired when so many
// masters held the lock for another owner that no majority could grant it
// (or another goroutine of this process was still acquiring it), or
// relock.ErrUnavailable, wrapping the masters' errors, when too few
// masters answered to decide. It fails with relock.ErrWouldDeadlock when
// ctx carries a lease of this lock, relock.ErrClosed when the first
// Client is or becomes closed, and relock.ErrInvalid for invalid
// arguments.
func (m *Mutex) Lock(ctx context.Context) (*relock.Lease, error) { return m.l.Lock(ctx) }

// TryLock makes one attempt, one parallel round trip to the masters (and
// one more to write the token back when it acquires). It fails with
// relock.ErrNotAcquired when so many masters hold the lock for another
// owner that no majority could grant it, or another goroutine of this
// process is acquiring it; with relock.ErrUnavailable, wrapping the
// masters' errors, when too few masters answered (in time) to decide —
// which never means that another owner holds it; and otherwise as Lock
// does.
func (m *Mutex) TryLock(ctx context.Context) (*relock.Lease, error) { return m.l.TryLock(ctx) }

// IsLocked reports whether a majority of the masters hold the lock.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) { return m.l.IsLocked(ctx) }

// ForceUnlock deletes the lock on every master whoever holds it, wakes its
// waiters, and reports whether any master held it. Each master that held
// it sends the holder's Client a loss notice, and the holder's lease
// Context ends at once with cause relock.ErrLockLost; notices that are
// lost (pub/sub is at-most-once) leave it to the holder's next renewal,
// which finds the lock gone.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return m.l.ForceUnlock(ctx) }

// Name returns the name of the lock.
func (m *Mutex) Name() string { return m.name }
