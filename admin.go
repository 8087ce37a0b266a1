package relock

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/relockgo/relock/luascripts"
)

// The calls on a lock that take no lease: every kind offers them.

// IsLocked reports whether any owner holds the lock.
func (b *binding) IsLocked(ctx context.Context) (bool, error) {
	if err := b.check(); err != nil {
		return false, err
	}
	return b.place.isLocked(ctx)
}

// isLocked reports whether the lock's key exists on its master.
func (m master) isLocked(ctx context.Context) (bool, error) {
	b, rc := m.b, m.b.c.rc
	n, err := rc.Do(ctx, rc.B().Exists().Key(b.keys.Lock).Build()).AsInt64()
	if err != nil {
		return false, b.wrap("is locked", err)
	}
	return n == 1, nil
}

// ForceUnlock deletes the lock whoever holds it, wakes its waiters, and
// reports whether it was held.
func (b *binding) ForceUnlock(ctx context.Context) (bool, error) {
	if err := b.check(); err != nil {
		return false, err
	}
	return b.place.forceUnlock(ctx)
}

// forceUnlock deletes the lock on its master. The evicted owner is not
// recorded as gone: it may be a waiter to which a release has just handed
// the lock, whose Lock is still running and would be refused the lock
// ever after.
func (m master) forceUnlock(ctx context.Context) (bool, error) {
	return m.b.forceUnlock(ctx, "0")
}

// forceUnlock deletes the lock on b's master and records its string owner
// as gone for goneMs ("0": not at all).
func (b *binding) forceUnlock(ctx context.Context, goneMs string) (bool, error) {
	n, err := b.c.scripts.Exec(ctx, luascripts.ForceUnlockCall(b.keys, b.c.publish, goneMs)).AsInt64()
	if err != nil {
		return false, b.wrap("force unlock", err)
	}
	return n == luascripts.Held, nil
}

// Query runs script s, a kind's read of its state, on the lock's keys
// with args, and returns its integer reply.
func (b *binding) Query(ctx context.Context, s luascripts.Script, args ...string) (int64, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	return b.place.query(ctx, s, args)
}

// query runs s on the lock's master.
func (m master) query(ctx context.Context, s luascripts.Script, args []string) (int64, error) {
	b := m.b
	return b.c.scripts.Exec(ctx, luascripts.QueryCall(s, b.keys, b.c.publish, args)).AsInt64()
}

// HoldCount returns the hold count that Redis records for the owner ctx
// carries, for a lock whose hash maps owners to hold counts: 0 when ctx
// carries no hold of this lock and side, or Redis no longer has it.
func (b *binding) HoldCount(ctx context.Context) (int, error) {
	if err := b.check(); err != nil {
		return 0, err
	}
	h := heldBy(ctx, b.c, b.keys.Lock, b.spec.Mode)
	if h == nil || b.spec.Unshared {
		return 0, nil
	}
	rc := b.c.rc
	v, err := rc.Do(ctx, rc.B().Hget().Key(b.keys.Lock).Field(h.owner).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return 0, nil
	case err != nil && h.ended.Load():
		// The hold ended while we asked (a loss notice cancels the
		// lease's Context, which may be ctx): it counts 0.
		return 0, nil
	case isWrongType(err):
		return 0, nil // a lock of another kind has the name now: not ours
	case err != nil:
		return 0, b.wrap("hold count", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, b.wrap("hold count", err)
	}
	return n, nil
}

// isWrongType reports whether err is Redis's WRONGTYPE: a key of another
// type than the command needs.
func isWrongType(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(e.Error(), "WRONGTYPE")
}
