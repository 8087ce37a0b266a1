package relock

import (
	"context"
	"time"

	"github.com/relockgo/relock/luascripts"
	"github.com/relockgo/relock/watchdog"
)

// A placement is where a lock lives: on one Redis master (master, the
// lock's binding itself), or on a quorum of independent masters (quorum,
// Redlock: multi.go). Every step of the engine that touches Redis goes
// through the lock's placement — the acquire loop, a hold's renewals, its
// release, the admin calls — and none asks which placement it has.
//
// A placement is fixed when the lock is bound and never changes.
type placement interface {
	// acquire runs the lock's acquire loop, after the engine's checks (an
	// invalid lock, a re-entry, a conflicting side of the call chain): it
	// returns a lease, or an error, never both nil. try makes one attempt.
	acquire(ctx context.Context, try bool) (*Lease, error)

	// entry returns the watchdog entry that keeps owner's hold, granted
	// with token by a command sent at sent; with handed not zero, the
	// grant is a hand-over certainly held until handed (see
	// waiter.handedOver). lost is told of a loss the watchdog finds.
	entry(owner string, token int64, sent, handed time.Time, lost func(error)) *watchdog.Entry

	// release ends owner's hold at count (1 or 0: all of it) within ctx,
	// retrying on network errors, and reports whether owner held the lock.
	release(ctx context.Context, owner string, count int) (held bool, err error)

	// extend renews owner's hold, granted with token, for ms milliseconds
	// from now, and reports whether owner still held it. It returns at
	// ctx's end whatever Redis does.
	extend(ctx context.Context, owner string, token int64, ms string) (held bool, err error)

	// cleanup releases, best-effort and on the caller's goroutine, what
	// owner may hold at count or where it may wait; with gone set it also
	// records owner as gone (see Client.abandon).
	cleanup(owner string, count int, gone bool)

	// closeCalls adds, for Client.Close, the release of owner's whole hold
	// on each master: the master's binding and the call.
	closeCalls(owner string, add func(on *binding, call luascripts.Call))

	// isLocked reports whether any owner holds the lock.
	isLocked(ctx context.Context) (bool, error)

	// forceUnlock deletes the lock whoever holds it, wakes its waiters,
	// and reports whether it was held.
	forceUnlock(ctx context.Context) (bool, error)

	// query runs script s, a kind's read of its state, on the lock's keys
	// with args, and returns its integer reply.
	query(ctx context.Context, s luascripts.Script, args []string) (int64, error)
}

// master is the placement of a lock on one Redis master: its binding, whose
// Client's rueidis client reaches that master. Its methods live beside the
// concept they serve: the acquire loop in engine.go, the entry in hold.go,
// releases in release.go, admin calls in admin.go.
type master struct{ b *binding }

var (
	_ placement = master{}
	_ placement = (*quorum)(nil)
)
