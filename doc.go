// Package relock provides distributed locks on Redis for Go services that run
// as many processes: a plain mutex (package mutex), a lock that nested calls
// may take again (package reentrant), a first-come-first-served lock
// (package fair), a read-write lock (package rwlock), one lock over
// several independent Redis masters (package redlock), and a counting
// semaphore whose permits are leases (package semaphore).
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
// lost: its Context is canceled with cause [ErrLockLost] and its
// [Lease.Unlock] returns ErrLockLost. Lock never hands out a lease whose
// [Lease.ValidUntil] has already passed (a grant whose reply came after its
// lease is released and not used). The holder can only learn of a loss
// while it runs, so a
// holder paused past its lease (GC, SIGSTOP, a slow disk) may still act
// after another has the lock.
//
// The locks are therefore advisory, as all lease locks are: they make
// conflicts rare, and safe only where the protected resource takes part.
// Every acquisition carries a fencing token ([Lease.Token]), strictly
// increasing per lock name across all clients and across Redis restarts
// (the server clock is its floor). Send it with each write and have the
// resource reject a token lower than the highest it has seen.
//
// A lock lives on one Redis master (package redlock spreads one over
// several, whose fencing tokens survive masters that restart empty only
// while the masters' clocks agree within a lease: see its safety model).
// Replication is asynchronous: a failover can lose a granted
// lock, unless the Client is made with [WithReplicaAck], which waits for
// replicas to acknowledge each grant and fails an unacknowledged one with
// [ErrNotReplicated]. Lock times are never taken from the client's clock:
// [Lease.ValidUntil] is measured on the local monotonic clock from when the
// last confirming command was sent, less an allowance for clock drift
// (lease/100 + 2ms).
//
// A relock call that takes a lock away from its holder (ForceUnlock, relock
// unlock --force) sends the holder's Client a loss notice: its Context ends
// within milliseconds. Pub/sub delivers at most once, so a holder learns of
// a loss at the latest at the watchdog's next renewal, lease/3 after the
// lock was taken away (10s at the default lease), provided its process
// runs; when renewals cannot get through, its Context ends when ValidUntil
// passes, which is before the key can expire on the server. A WithLease
// lease is not renewed: its holder learns at its ValidUntil at the latest.
// So a holder may act on a lock it lost for up to lease/3, and for as long
// as it is paused. Work under a lock therefore sends the token to the store
// (the only protection against pauses); passes [Lease.Context] to the calls
// that make side effects, so that they stop once the loss is known; checks,
// before a step that must finish under the lock, that
// time.Until(lease.ValidUntil()) exceeds the step's worst case; and checks
// [Lease.Unlock]'s error, ErrLockLost when the lease ended before it, which
// a bare defer drops. A shorter [WithWatchdogTimeout] shortens the wait for
// the news (the Client's due leases share one round trip).
//
// # Ownership and waiting
//
// A lock's owner is carried by ctx, not by the goroutine: [Lease.Context]
// carries it, and a Lock of the same lock with that ctx re-enters (reentrant,
// fair, rwlock) or fails with [ErrWouldDeadlock] (mutex, redlock). A call
// chain may fan out: goroutines handed the ctx re-enter and may finish in
// any order; each Unlock ends one lease, and the lock is released when the
// last lease of the hold is unlocked.
//
// The ctx given to Lock bounds the wait only, and Lock returns within a few
// milliseconds of its end whatever Redis does: an attempt under a ctx that
// can end runs in a goroutine the caller leaves at ctx's end (rueidis heeds
// a cancellation only in its pipeline, and none while it dials a broken
// connection again); under [context.Background] it runs on the caller's
// goroutine, which the uncontended path then never leaves. An attempt
// whose reply never came may still land: its owner is recorded as gone, so
// that its acquire is refused, and released, in the background, tracked by
// [Client.Close] (no holder nobody tracks). Unlock runs on its own timeout,
// and returns within it whatever Redis does.
//
// Waiting never polls: an uncontended Lock is one round trip; a waiter
// subscribes once to the lock's wake-up channel (one subscription per lock
// per Client, shared by its waiters, on a health-checked connection that is
// replaced when it stops answering), and hears the wake-ups that name its
// owners on its Client's own channel of the lock, so that a hand-over wakes
// one process however many wait; it retries when the holder releases,
// when the holder's lease would have expired, or after a few seconds at
// most, since pub/sub may drop a message while reconnecting.
//
// No waiter starves. The fair lock grants in arrival order. The mutex and
// the reentrant lock, like [sync.Mutex], let a newcomer take a free lock
// ahead of waiters, which keeps a hot lock passing quickly, until a waiter
// has waited 50 ms: it then takes a place in the lock's queue, newcomers
// wait behind it, and the lock goes in queue order until the queue is
// empty: each release hands the lock to the first queued waiter in the
// same script and wakes it with the grant's fencing token (a direct
// handoff: its Lock returns on that message; the grant lasts what was left
// of its waiter timeout until the watchdog extends it). A handoff's message
// is trusted only while it is fresh — its token is the server's clock when
// it was minted, dated against the clock the waiter's last attempt read —
// and only while it leaves the waiter a useful part of its lease; a stale
// one (a process paused with it in its socket, while Redis lost the grant)
// or a short one is taken up by one more attempt. The waiters behind
// it are not woken: each sleeps no later than the first waiter's deadline,
// so that a grant to a waiter that died passes on when it expires. A queued waiter's
// place is kept by heartbeats and lapses WithWaiterTimeout after
// its process died. Without a queue, a release wakes one waiter per
// Client. A read-write lock's waiting writers queue, and take the lock in
// arrival order, handed it as the queued waiters of the mutex are; the
// readers a writer kept out are handed their read holds by that writer's
// release, each woken by name with a token of its own.
// (Redlock waiters do not queue: see package redlock.)
//
// # Observing
//
// [WithObserver] reports every acquisition, release, renewal and loss to an
// [Observer]; the module github.com/relockgo/relock/otel turns them into
// OpenTelemetry metrics and spans.
//
// # Redis layout
//
// Any non-empty byte string is a lock name. For prefix P (WithKeyPrefix) and
// lock name N, the keys hold E: N with '%', '{' and '}' percent-encoded as
// %25, %7B and %7D, every other byte as it is, so that common names read in
// redis-cli as they were written (order:{42} becomes order:%7B42%7D). E holds
// no brace, so every key of a lock shares the hash tag {E} and the lock lives
// in one cluster slot; different names give different E, so two locks never
// share a key. The keys of a lock:
//
//   - P:{E}, the lock: a string (mutex), a hash of owner → hold count, or
//     a semaphore's hash (its size, the permits held, each holder's
//     permits, token and expiry);
//   - P:{E}:fence, the last fencing token issued;
//   - P:{E}:queue, queued waiters in arrival order (a fair lock's, a
//     mutex's or reentrant lock's starving waiters and those behind them,
//     a read-write lock's waiting writers, a semaphore's), whatever their
//     kind: a zset where each waiter is two members scored by its arrival,
//     its owner id and its record "owner deadline keep grant" (deadline:
//     server time in ms until which it is alive; keep: a time before
//     which the key cannot expire; grant: how a hand-over gives it the
//     lock, "string", "hash" or "permits");
//   - P:{E}:readers, a read-write lock's readers' deadlines;
//   - P:{E}:gone, owners whose acquire may still land after they gave up,
//     refused when it does;
//   - P:{E}:wake, the wake-up channel of broadcasts (sharded pub/sub in
//     cluster mode);
//   - P:{E}:wake:<client id>, the wake-ups and loss notices that name an
//     owner of that Client (an owner id is <client id>:<n>). Outside
//     cluster mode a Client hears all of its own through one pattern
//     subscription, P:{*}:wake:<client id>; in cluster mode it subscribes
//     to the channel of each lock it waits on (sharded), and hears loss
//     notices, sent with plain PUBLISH, through that pattern.
//
// Locks of different kinds with the same name share P:{E} and exclude each
// other. The relock command (relock inspect, relock list) takes and shows
// the original name N, never E.
package relock
