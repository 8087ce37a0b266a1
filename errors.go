package relock

import (
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// Errors returned by relock. Match them with errors.Is: most are wrapped with
// the lock's name and what went wrong.
var (
	// ErrNotAcquired reports that TryLock found the lock held by another
	// owner, or, joined with the ctx's error, that Lock's ctx ended while the
	// lock was held by another owner.
	ErrNotAcquired = errors.New("relock: lock held by another owner")

	// ErrLockLost reports that a lease ended without Unlock: a renewal found
	// the lock gone or held by another owner, or the lease's validity passed
	// without a successful renewal. It is the cause of a lost lease's Context
	// and the result of its Unlock.
	ErrLockLost = errors.New("relock: lock lost")

	// ErrNotHeld reports an Unlock of a lease that was already unlocked.
	ErrNotHeld = errors.New("relock: lease not held")

	// ErrWouldDeadlock reports a Lock that could only wait for itself: a
	// plain mutex locked again in the call chain that holds it, or a reader
	// asking for the write lock it shares.
	ErrWouldDeadlock = errors.New("relock: lock would deadlock")

	// ErrClosed reports use of a closed Client, or, as a lease's Context
	// cause and Unlock result, that Close released the lease. A call that
	// finds the Client's rueidis client closed fails with ErrClosed joined
	// with rueidis.ErrClosing (either matches), saying that the rueidis
	// client is closed; a Lock waiting at that moment returns it within
	// about a second.
	ErrClosed = errors.New("relock: client closed")

	// ErrNotReplicated reports a grant that fewer replicas acknowledged,
	// within its timeout, than the Client's WithReplicaAck asks for: the
	// grant was released. TryLock returns it; Lock tries again until its
	// ctx ends, and then returns it joined with the ctx's error.
	ErrNotReplicated = errors.New("relock: grant not acknowledged by enough replicas")

	// ErrInvalid reports a bad argument. It is always wrapped with what was
	// wrong.
	ErrInvalid = errors.New("relock: invalid argument")

	// ErrUnavailable reports that too few Redis servers answered to decide:
	// a redlock's TryLock, or its Lock when its ctx ended, whose last
	// attempt neither a quorum of masters granted nor so many refused for
	// another owner that no quorum could; a TryLock of a single-master
	// kind, or its Lock when its ctx ended, whose last attempt did not
	// reach Redis or got no answer. It never means that another owner
	// holds the lock, and is wrapped with the servers' errors.
	ErrUnavailable = errors.New("relock: too few redis servers answered")
)

// unavailable returns the error of op on b's lock when too few servers
// answered: it matches ErrUnavailable and err.
func (b *binding) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s %s: %s: %w", ErrUnavailable, b.kind(), b.short(), op, err)
}

// failed returns the error of op on b's lock, whose last round trip
// failed with err, joined with also (the ctx's error, or nil). It matches
// ErrUnavailable when err says Redis was not reached or did not answer (a
// network error or a timeout), not when Redis refused (an error reply), the
// client was closed, the grant was not replicated, or the caller stopped
// waiting.
func (b *binding) failed(op string, err, also error) error {
	switch {
	case isRedisErr(err), errors.Is(err, rueidis.ErrClosing), errors.Is(err, ErrClosed),
		errors.Is(err, ErrNotReplicated), errors.Is(err, errGaveUp):
		return b.wrap(op, join(err, also))
	}
	return b.unavailable(op, join(err, also))
}
