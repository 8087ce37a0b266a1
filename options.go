package relock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/relockgo/relock/internal/ownerid"
)

// MinLease is the shortest lease relock accepts, for WithLease and
// WithWatchdogTimeout alike: shorter leases would be spent on the clock drift
// allowance and the round trip before they could be used.
const MinLease = 10 * time.Millisecond

// An Option configures a Client.
type Option func(*clientConfig)

type clientConfig struct {
	prefix  string
	timeout time.Duration
	log     *slog.Logger
	obs     Observer
	ack     replicaAck
	label   string // sanitized; "" for none
	err     error  // the first invalid option
}

// invalid records the first invalid option, as ErrInvalid.
func (c *clientConfig) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
}

// WithKeyPrefix sets the prefix of every Redis key and channel the Client
// uses: lock N lives at "prefix:{E}", where E is N with '%', '{' and '}'
// percent-encoded (see "Redis layout" in the package doc). The default is
// "relock". A prefix that is empty or holds '{' or '}' (which would change
// the cluster hash tag) makes New fail with ErrInvalid.
func WithKeyPrefix(prefix string) Option {
	return func(c *clientConfig) {
		if prefix == "" || strings.ContainsAny(prefix, "{}") {
			c.invalid("key prefix %q: must be non-empty and hold no '{' or '}'", prefix)
			return
		}
		c.prefix = prefix
	}
}

// WithWatchdogTimeout sets the lease of every lock held without WithLease.
// The watchdog renews such leases every d/3, so a holder that dies keeps the
// lock for at most d. The default is 30s. A d below MinLease makes New fail
// with ErrInvalid.
func WithWatchdogTimeout(d time.Duration) Option {
	return func(c *clientConfig) {
		if d < MinLease {
			c.invalid("watchdog timeout %v: must be at least %v", d, MinLease)
			return
		}
		c.timeout = d
	}
}

// WithLogger sets where the Client logs what it cannot return as an error:
// renewal retries, failed best-effort releases, lost subscriptions. The
// default, and a nil l, discard logs.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.log = l
	}
}

// WithObserver sets o to be told of the Client's acquisitions, releases,
// renewals and losses (see Observer). The default, and a nil o, is none.
func WithObserver(o Observer) Option {
	return func(c *clientConfig) { c.obs = o }
}

// WithOwnerLabel gives the Client's owner ids a label, such as "host:pid",
// that `relock inspect` and `relock watch` show beside each owner, and that
// Observers find in the events' Owner: the Client's id becomes
// "<label>@<UUID>" and an owner id "<label>@<UUID>:<seq>". Runes other than
// ASCII letters, digits and "._:/-" become '_', surrounding spaces are
// dropped, and the label is cut to 64 bytes. A label that is empty or only
// spaces makes New fail with ErrInvalid. The default is no label.
func WithOwnerLabel(label string) Option {
	return func(c *clientConfig) {
		clean, ok := ownerid.Sanitize(label)
		if !ok {
			c.invalid("owner label %q: must hold more than spaces", label)
			return
		}
		c.label = clean
	}
}

// WithReplicaAck makes every grant wait until at least replicas replicas of
// the master acknowledged it, for up to timeout: each acquire script is
// followed by WAIT replicas timeout in the same round trip, on the same
// connection. A grant that fewer replicas acknowledged is released
// (owner-checked) and the attempt fails: TryLock returns an error matching
// ErrNotReplicated; Lock tries again, with a backoff, until its ctx ends. A
// lease then survives a failover to any replica that acknowledged it — with
// Redis's asynchronous replication, without WithReplicaAck a failover can
// lose a just-granted lock and let a second owner in.
//
// It applies to every kind's first acquisition, and to each master's grant
// of a lock held on several masters (package redlock), whose node timeout
// must then exceed timeout. Re-entries, renewals and releases do not wait:
// a re-entry or renewal only extends an expiry, and a failover that loses
// one leaves the replica's copy of the hold with the expiry last
// replicated, which the watchdog renews on the new master at its next
// round (every lease/3) — a hold survives a failover that completes within
// two thirds of its lease; a release that a failover loses lets the lock
// expire after its lease, as a holder's crash would.
//
// The time the acknowledgement takes comes off the lease's validity. While
// fewer than replicas replicas are connected, every attempt — even one that
// finds the lock held, since WAIT waits for the connection's last write —
// can take up to timeout (twice, right after a failover, when the new
// master lacks the script and it is sent again): keep timeout short, and
// replicas at most the number of replicas a master keeps after a failover. A
// replicas of 0 turns acknowledgements off (the default); a negative
// replicas, or a timeout below 1ms while replicas is positive, makes New
// fail with ErrInvalid.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *clientConfig) {
		switch {
		case replicas < 0:
			c.invalid("replica ack: %d replicas: must not be negative", replicas)
		case replicas > 0 && timeout < time.Millisecond:
			c.invalid("replica ack timeout %v: must be at least 1ms", timeout)
		default:
			c.ack = replicaAck{replicas, timeout}
		}
	}
}

// replicaAck is WithReplicaAck's setting: replicas 0 is none.
type replicaAck struct {
	replicas int
	timeout  time.Duration
}

// A LockOption configures one lock; every kind's constructor accepts them.
type LockOption func(*lockConfig)

type lockConfig struct {
	lease         time.Duration // 0: watchdog-managed
	waiterTimeout time.Duration
	nodeTimeout   time.Duration // 0: the default
	err           error         // the first invalid option
}

// DefaultWaiterTimeout is how long a waiter that stopped heart-beating stays
// queued, unless WithWaiterTimeout says otherwise.
const DefaultWaiterTimeout = 5 * time.Second

// WithWaiterTimeout sets how long a waiter that leaves a trace in Redis — a
// queued waiter (a fair lock's, or a mutex's or reentrant lock's waiter
// that starved; see the package doc), a read-write lock's waiting writer —
// keeps its place after it stops heart-beating (its process died or was cut
// off). Live waiters heartbeat every d/3, so d bounds how long a dead waiter
// holds up those behind it. The default is DefaultWaiterTimeout; redlock
// ignores it. A d below MinLease makes Lock and TryLock fail with ErrInvalid.
func WithWaiterTimeout(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < MinLease {
			if c.err == nil {
				c.err = fmt.Errorf("%w: waiter timeout %v: must be at least %v", ErrInvalid, d, MinLease)
			}
			return
		}
		c.waiterTimeout = d
	}
}

// WithLease gives the lock a fixed lease of d instead of a watchdog-managed
// one: the lock is not renewed and expires d after it was acquired (or last
// re-entered), whether or not the holder is done. The lease's Context is then
// canceled with cause ErrLockLost. A d below MinLease makes Lock and TryLock
// fail with ErrInvalid. A grant whose reply arrives too late to leave any of
// d (less the drift allowance) is released: TryLock then fails with
// ErrNotAcquired, and Lock tries again, until its ctx ends, so d must
// outlast an acquire's round trip by a margin.
func WithLease(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < MinLease {
			if c.err == nil {
				c.err = fmt.Errorf("%w: lease %v: must be at least %v", ErrInvalid, d, MinLease)
			}
			return
		}
		c.lease = d
	}
}

// WithNodeTimeout sets how long a lock held on several Redis masters
// (package redlock) waits for each master's answer to an acquire before it
// counts that master as not granting. It must stay far below the lease: the
// time spent acquiring comes off the lease's validity. The default is
// lease/50, and at least 5ms; other kinds ignore it. A d below 1ms makes
// Lock and TryLock fail with ErrInvalid.
func WithNodeTimeout(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < time.Millisecond {
			if c.err == nil {
				c.err = fmt.Errorf("%w: node timeout %v: must be at least 1ms", ErrInvalid, d)
			}
			return
		}
		c.nodeTimeout = d
	}
}
