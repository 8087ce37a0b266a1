// Package relock provides distributed locks on Redis for Go services that run
// as many processes: a plain mutex (package mutex), a lock that nested calls
// may take again (package reentrant), a first-come-first-served lock
// (package fair) and a read-write lock (package rwlock).
//
// Every lock hangs off a Client, which holds the Redis connection (a
// rueidis.Client the caller owns), one watchdog that renews all leases, and
// the wake-up subscriptions waiters share:
//
//	c, err := relock.New(rc)
//	…
//	defer c.Close()
//	m := mutex.New(c, "invoice:42")
//	lease, err := m.Lock(ctx)
//	if err != nil {
//		return err
//	}
//	defer lease.Unlock()
//	ctx = lease.Context() // canceled if the lock is lost
//
// # Safety model
//
// A relock lock is a lease: it is held until Unlock, or until its lease runs
// out. Without WithLease the Client's watchdog renews every held lease each
// third of its length (WithWatchdogTimeout, 30s by default), so a lock
// outlives its holder by at most one lease. A renewal that finds the lock
// gone or owned by another, or a lease whose validity passes without a
// successful renewal (Redis unreachable, process paused), makes the lease
// lost: its Context is canceled with cause ErrLockLost and its Unlock
// returns ErrLockLost. The holder can only learn this while it runs, so a
// holder paused past its lease (GC, SIGSTOP, a slow disk) may still act
// after another has the lock.
//
// The locks are therefore advisory, as all lease locks are: they make
// conflicts rare, and safe only where the protected resource takes part.
// Every acquisition carries a fencing token (Lease.Token), strictly
// increasing per lock name across all clients and across Redis restarts
// (the server clock is its floor). Send it with each write and have the
// resource reject a token lower than the highest it has seen.
//
// A lock lives on one Redis master. Replication is asynchronous: a failover
// can lose a granted lock. Lock times are never taken from the client's
// clock: Lease.ValidUntil is measured on the local monotonic clock from when
// the last confirming command was sent, less an allowance for clock drift
// (lease/100 + 2ms).
//
// # Ownership and waiting
//
// A lock's owner is carried by ctx, not by the goroutine: Lease.Context
// carries it, and a Lock of the same lock with that ctx re-enters (reentrant,
// fair, rwlock) or fails with ErrWouldDeadlock (mutex). The ctx given to Lock
// bounds the wait only; Unlock runs on its own timeout.
//
// Waiting never polls: an uncontended Lock is one round trip; a waiter
// subscribes once to the lock's wake-up channel (one subscription per lock
// per Client, shared by its waiters) and retries when the holder releases,
// when the holder's lease would have expired, or after a few seconds at
// most, since pub/sub may drop a message while reconnecting.
//
// # Redis layout
//
// For prefix P (WithKeyPrefix) and lock name N, every key of a lock shares
// the hash tag {N}, so a lock lives in one cluster slot: P:{N} is the lock,
// P:{N}:fence its last token, and P:{N}:wake its wake-up channel; fair and
// read-write locks add P:{N}:queue, P:{N}:waiters and P:{N}:readers. Locks of
// different kinds with the same name share P:{N} and exclude each other.
package relock
