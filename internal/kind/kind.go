// Package kind is the contract between package relock, which runs the one
// locking engine (acquire loop, leases, watchdog, wake-ups), and the lock
// kinds (mutex, reentrant, fair, rwlock), which describe themselves to it with
// a Spec.
//
// The kinds import package relock for its public types, so relock cannot
// import them, and they cannot reach its unexported engine. relock therefore
// installs the engine here at init (Register), and kinds bind their locks
// through New. The values cross this boundary as any; Lock converts them back
// so that neither side repeats the assertions.
package kind

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

// Spec describes a lock kind to the engine. The engine calls its scripts
// with the same KEYS and ARGV whatever the kind; each script uses what it
// needs:
//
//	acquire  KEYS lock, fence, queue, waiters, readers
//	         ARGV owner, lease ms, "1" to wait (Lock) or "0" (TryLock),
//	              waiter timeout ms, wake-up channel, publish command,
//	              owner of the caller's hold of the Within mode, or ""
//	         → {1, token} when acquired, {0, wait ms} when not, where wait is
//	           how long nothing changes without a wake-up (-1: unknown,
//	           -2: try again at once)
//	reenter  KEYS lock, readers   ARGV owner, lease ms, hold count after
//	         → 1 held at that count, 0 not held
//	release  KEYS lock, queue, waiters, readers
//	         ARGV owner, wake-up channel, publish command, hold count ended
//	              (n > 1 leaves n − 1; 1 or 0 releases the owner's hold)
//	         → 1 released, 0 not held; for an owner that does not hold
//	           the lock, it withdraws the owner as a waiter
//	renew    KEYS lock, readers   ARGV owner, lease ms → 1 renewed, 0 not held
//	heartbeat KEYS lock, queue, waiters
//	         ARGV owner, waiter timeout ms, wake-up channel, publish command
//	         → 1 still waiting, 0 not
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

	Acquire *rueidis.Lua
	// Reenter is nil for a kind that cannot be re-entered: the engine then
	// fails re-entry with ErrWouldDeadlock.
	Reenter *rueidis.Lua
	Release *rueidis.Lua
	// Renew extends a held lease; the watchdog batches it.
	Renew *rueidis.Lua
	// Heartbeat keeps a waiter's place; nil for a kind whose waiters leave
	// no trace in Redis. The watchdog batches it, every waiter timeout / 3.
	Heartbeat *rueidis.Lua
}

// Keys are the Redis names of one lock. They share the hash tag {name}, so a
// lock lives in one cluster slot.
type Keys struct {
	Lock    string // the lock itself: string (mutex) or hash of owner → holds
	Fence   string // the last fencing token issued
	Queue   string // fair: waiters in arrival order
	Waiters string // fair: waiter deadlines
	Readers string // rwlock: reader deadlines
	Wake    string // the wake-up channel
}

// NewKeys returns the keys of lock name under prefix.
func NewKeys(prefix, name string) Keys {
	base := prefix + ":{" + name + "}"
	return Keys{
		Lock:    base,
		Fence:   base + ":fence",
		Queue:   base + ":queue",
		Waiters: base + ":waiters",
		Readers: base + ":readers",
		Wake:    base + ":wake",
	}
}

// Binding is one named lock bound to a Client's engine. Package relock
// implements it.
type Binding interface {
	// Acquire locks, waiting unless try is set. Its lease is a *relock.Lease.
	Acquire(ctx context.Context, try bool) (lease any, err error)
	// Check returns the error every call on this lock would fail with: an
	// invalid name or option (ErrInvalid), a closed Client (ErrClosed).
	Check() error
	// Redis is the Client's Redis client.
	Redis() rueidis.Client
	// Keys are the lock's Redis names.
	Keys() Keys
	// Publish is the command that publishes wake-ups: "publish", or
	// "spublish" in cluster mode.
	Publish() string
	// Owner returns the owner id that ctx holds this lock as, if any.
	Owner(ctx context.Context) (owner string, ok bool)
	// Wrap annotates err with the kind and the lock's name.
	Wrap(op string, err error) error
}

var bind func(client any, name string, spec *Spec, opts any) Binding

// Register installs the engine. Package relock calls it at init.
func Register(f func(client any, name string, spec *Spec, opts any) Binding) { bind = f }

// Lock is a Binding whose leases are of type L (*relock.Lease).
type Lock[L any] struct{ Binding }

// New binds lock name of spec to client (a *relock.Client) with opts (a
// []relock.LockOption).
func New[L any](client any, name string, spec *Spec, opts any) Lock[L] {
	return Lock[L]{bind(client, name, spec, opts)}
}

// Lock waits until the lock is acquired or ctx ends.
func (l Lock[L]) Lock(ctx context.Context) (L, error) { return l.acquire(ctx, false) }

// TryLock makes one attempt.
func (l Lock[L]) TryLock(ctx context.Context) (L, error) { return l.acquire(ctx, true) }

func (l Lock[L]) acquire(ctx context.Context, try bool) (L, error) {
	v, err := l.Acquire(ctx, try)
	lease, _ := v.(L)
	return lease, err
}

// IsLocked reports whether any owner holds the lock.
func (l Lock[L]) IsLocked(ctx context.Context) (bool, error) {
	if err := l.Check(); err != nil {
		return false, err
	}
	rc := l.Redis()
	n, err := rc.Do(ctx, rc.B().Exists().Key(l.Keys().Lock).Build()).AsInt64()
	if err != nil {
		return false, l.Wrap("is locked", err)
	}
	return n == 1, nil
}

// ForceUnlock deletes the lock whoever holds it, wakes its waiters, and
// reports whether it was held.
func (l Lock[L]) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.Check(); err != nil {
		return false, err
	}
	k := l.Keys()
	n, err := luascripts.ForceUnlock.Exec(ctx, l.Redis(), []string{k.Lock}, []string{k.Wake, l.Publish()}).AsInt64()
	if err != nil {
		return false, l.Wrap("force unlock", err)
	}
	return n == 1, nil
}

// HoldCount returns the hold count that Redis records for the owner ctx
// carries, for a lock whose hash maps owners to hold counts: 0 when ctx
// carries no hold of the lock or Redis no longer has it.
func (l Lock[L]) HoldCount(ctx context.Context) (int, error) {
	if err := l.Check(); err != nil {
		return 0, err
	}
	owner, ok := l.Owner(ctx)
	if !ok {
		return 0, nil
	}
	rc := l.Redis()
	v, err := rc.Do(ctx, rc.B().Hget().Key(l.Keys().Lock).Field(owner).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, nil
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return 0, nil // a lock of another kind has the name now: not ours
	case err != nil:
		return 0, l.Wrap("hold count", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, l.Wrap("hold count", err)
	}
	return n, nil
}
