package relock

import (
	"context"
	"time"
)

// An Observer is told what a Client's locks do, for metrics and tracing
// (package github.com/relockgo/relock/otel turns these events into
// OpenTelemetry metrics and spans). Set one with WithObserver; a Client
// without one pays nothing for the hooks.
//
// The methods are called synchronously, on the goroutine where the event
// happens (LockStarted and LockDone on the caller's, Renewed and Lost on
// the watchdog's), so they must return quickly and must not block or call
// back into the Client's locks.
type Observer interface {
	// LockStarted is called when Lock or TryLock starts, with the caller's
	// ctx. The ctx it returns is passed to LockDone (a tracer puts its
	// span there); it does not change the ctx the lock uses.
	LockStarted(ctx context.Context, e LockStart) context.Context
	// LockDone is called when that Lock or TryLock returns.
	LockDone(ctx context.Context, e LockDone)
	// Released is called when a hold ends by the Unlock of its last lease.
	Released(e Released)
	// Renewed is called after each renewal round trip of the watchdog.
	Renewed(e Renewed)
	// Lost is called when a hold is lost: its Context is canceled with
	// cause e.Cause.
	Lost(e Lost)
}

// LockStart describes a Lock or TryLock as it starts.
type LockStart struct {
	Kind string // "mutex", "reentrant", "fair", "rwlock.read", "rwlock.write", "redlock", "semaphore"
	Name string // the lock's name
	Try  bool   // TryLock
}

// LockDone describes how a Lock or TryLock ended.
type LockDone struct {
	LockStart
	Owner   string        // the owner id of the hold when acquired (see Released.Owner); "" otherwise
	Reentry bool          // the ctx held the lock already: a re-entry
	Wait    time.Duration // from the call to its return
	Token   int64         // the fencing token when acquired
	Err     error         // nil when acquired; matches ErrNotAcquired when the lock was held
}

// Released describes a hold that ended by Unlock.
type Released struct {
	Kind, Name string
	// Owner is the hold's owner id, as Redis records it and relock inspect
	// shows it: "<client id>:<seq>", where the client id (before the last
	// ':') is the Client's UUID, or "<label>@<UUID>" with WithOwnerLabel.
	Owner string
	Held  time.Duration // from the grant to the release
	Err   error         // the release's error: nil, or Redis's (the lock then expires)
}

// Renewed describes one renewal round trip of the watchdog.
type Renewed struct {
	Leases  int           // leases and waiter places renewed in the round trip
	Latency time.Duration // of the round trip
	Failed  int           // renewals that got no answer (retried until their lease ends)
	Lost    int           // leases the round trip found lost
}

// Lost describes a hold that ended without Unlock.
type Lost struct {
	Kind, Name string
	Owner      string        // the hold's owner id (see Released.Owner)
	Held       time.Duration // from the grant to the loss
	Cause      error         // matches ErrLockLost, or ErrClosed when Close released it
}
