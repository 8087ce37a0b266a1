package relock

import "context"

// Ownership travels in a ctx: a Lease's Context carries a chain of the holds
// it and the leases it was taken under own. Lock of the same lock with such a
// ctx re-enters instead of waiting for itself. Ownership is the ctx, not the
// goroutine: a goroutine handed the ctx owns what it owns.

type ownerKey struct{}

// chain is an immutable list of holds; the newest first.
type chain struct {
	h    *hold
	next *chain
}

// heldBy returns the live hold of side mode of lock key of c that ctx
// carries, if any. A hold that ended (unlocked, lost) owns nothing any more.
func heldBy(ctx context.Context, c *Client, key, mode string) *hold {
	for ch, _ := ctx.Value(ownerKey{}).(*chain); ch != nil; ch = ch.next {
		if b := ch.h.b; b.c == c && b.keys.Lock == key && b.spec.Mode == mode && ch.h.ctx.Err() == nil {
			return ch.h
		}
	}
	return nil
}

// withHold returns ctx carrying h as well.
func withHold(ctx context.Context, h *hold) context.Context {
	next, _ := ctx.Value(ownerKey{}).(*chain)
	return context.WithValue(ctx, ownerKey{}, &chain{h: h, next: next})
}
